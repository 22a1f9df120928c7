"""deploy/Containerfile builds from files that exist and runs the package's console script.

No container engine runs in the test environment, so this checks what can be checked
without one: every COPY source is in the repository, the package build gets every file
pyproject.toml names, the libraries match scripts/setup.sh, and the entrypoint is the
console script pyproject.toml declares, in the venv the build stage installs into.
"""

from __future__ import annotations

import json
import pathlib
import shlex

import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile, continuation lines joined."""
    logical, current = [], ""
    for line in CONTAINERFILE.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
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


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_copied_file_exists_and_the_build_gets_what_pyproject_names():
    copied: set[str] = set()
    for instruction, args in instructions():
        if instruction == "COPY" and not args.startswith("--from"):
            *sources, _ = shlex.split(args)
            for source in sources:
                assert (ROOT / source).exists(), source
                copied.add(source)
    project = pyproject()["project"]
    needed = {project["readme"], *project["license-files"], "pyproject.toml", "nova_orphans"}
    assert needed <= copied, needed - copied


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


def test_the_entrypoint_is_the_console_script_of_the_installed_venv():
    build, run = stages()
    venvs = [a.split()[-1] for i, a in build if i == "RUN" and "-m venv" in a]
    assert len(venvs) == 1
    venv = venvs[0]
    assert any(i == "RUN" and a.startswith(f"{venv}/bin/pip install") for i, a in build)
    assert ("COPY", f"--from=build {venv} {venv}") in run
    (script,) = pyproject()["project"]["scripts"]
    entrypoint = json.loads(dict(run)["ENTRYPOINT"])
    assert entrypoint == [f"{venv}/bin/{script}"]
    command = json.loads(dict(run)["CMD"])
    assert command == ["run", "--config-file", "/etc/nova-orphans/nova-orphans.conf"]


def test_the_state_directory_is_a_volume_and_the_run_example_mounts_what_the_agent_needs():
    run = stages()[1]
    assert json.loads(dict(run)["VOLUME"]) == ["/var/lib/nova-orphans"]
    text = CONTAINERFILE.read_text()
    guide = (ROOT / "doc" / "source" / "admin" / "deploy.md").read_text()
    assert "-v /run/nova-orphans:/run/nova-orphans" in guide
    for mount in (
        "-v /run/libvirt:/run/libvirt",
        # NOTE: docs/design.md rule 14: the host's live lock, shared with every agent on it.
        "-v /run/nova-orphans:/run/nova-orphans",
        ":/etc/nova/nova.conf:ro",
        ":/etc/nova-orphans:ro",
        "-v /var/lib/nova-orphans:/var/lib/nova-orphans",
        ":/var/lib/nova ",
    ):
        assert mount in text, mount
