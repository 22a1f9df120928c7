"""docs/design.md rule 11: config is strict.

An unknown group or key, or an invalid value, in any config file is one line on
stderr and exit 2 before anything runs: no Nova request, no journal, no
quarantine, no step on a guest. Every command loads its config the same way,
so ``audit`` refuses what ``run`` refuses.
"""

from __future__ import annotations

import pathlib
import re
import socket
import subprocess
import sys

import pytest
from oslo_config import cfg

from nova_orphans import cli, config, exits
from nova_orphans.act.recording import RecordingEffects
from nova_orphans.config import loading, opts, strict
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "nova_orphans" / "data" / "nova-orphans.conf.sample"
HOST = "cmp-1"
NOVA = "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"


def write(tmp_path: pathlib.Path, text: str, name: str = "nova-orphans.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def state_conf(tmp_path: pathlib.Path, agent: str = "", extra: str = "") -> str:
    """A config whose agent state lives under tmp_path/state (so "nothing created" is checkable)."""
    return write(
        tmp_path,
        f"[DEFAULT]\nhost = {HOST}\n[agent]\nstate_dir = {tmp_path / 'state'}\n{agent}\n"
        f"{extra}{NOVA}",
    )


# --------------------------------------------------------------- the typo that used to stop a guest


class ArmedHost:
    """A host where a live ``run --once`` stops a guest: Nova deleted it, no grace, one sighting.

    Nova is a simulated Nova behind the real observer; the live effects record
    what they are asked to do (and change nothing), so the test sees every step.
    """

    def __init__(self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nova = SimulatedNova()
        worlds.write_compute_id(self.nova.add_compute(HOST, **worlds.test_driver_node()).node_uuid)
        self.orphan = self.nova.boot(HOST, "orphan")
        healthy = self.nova.boot(HOST, "healthy")
        self.nova.local_delete(self.orphan)
        self.uri = worlds.write_node_file(
            tmp_path,
            [
                worlds.node_domain(
                    uuid=u, name=worlds.instance_name(), metadata=worlds.nova_metadata()
                )
                for u in (self.orphan, healthy)
            ],
        )
        self.live: list[RecordingEffects] = []
        live = self.live

        class LiveSpy(RecordingEffects):
            def __init__(self, uri: str, instances_path: str, quarantine: str, *_: object) -> None:
                super().__init__(uri, instances_path, quarantine)
                live.append(self)

        monkeypatch.setattr("nova_orphans.cli.agent.LiveEffects", LiveSpy)
        monkeypatch.setattr("nova_orphans.cli.agent.transport_from_conf", lambda conf: self.nova)

    def stops(self) -> list[tuple[object, ...]]:
        return [args for effects in self.live for name, args in effects.calls if name == "stop"]


ARMED = "action_deleted = stop\ngrace_period = 0\nsightings_required = 1\n"


def test_the_armed_host_really_stops_the_orphan_without_dry_run(tmp_path, capsys, monkeypatch):
    """Control for the typo test below: the same host and config, spelled right, acts."""
    host = ArmedHost(tmp_path, monkeypatch)
    config_file = state_conf(tmp_path, ARMED + "dry_run = false\n")
    code, _, err = run(
        capsys, "run", "--once", "--config-file", config_file, "--libvirt-uri", host.uri
    )
    assert code == exits.ACTED, err
    assert [args[0] for args in host.stops()] == [host.orphan]


def test_a_typo_of_dry_run_is_an_error_and_nothing_runs(tmp_path, capsys, monkeypatch):
    host = ArmedHost(tmp_path, monkeypatch)
    config_file = state_conf(tmp_path, ARMED + "dryrun = true\n")
    code, out, err = run(
        capsys, "run", "--once", "--config-file", config_file, "--libvirt-uri", host.uri
    )
    assert code == exits.USAGE
    assert err == [
        f"nova-orphans: config error: {config_file}: [agent] dryrun is not an option; "
        "did you mean dry_run?"
    ]
    assert out == ""
    assert host.live == [] and host.stops() == []  # no effects made, no guest touched
    assert host.nova.request_count == 0  # Nova was not even asked
    assert not (tmp_path / "state").exists()  # no journal, no quarantine


# ---------------------------------------------------------------- values checked before any cycle


@pytest.mark.parametrize(
    ("agent", "extra", "line"),
    [
        pytest.param(
            "interval = 5\n",
            "",
            "[agent] interval = 5 is not valid: should be greater than or equal to 10",
            id="interval below its minimum",
        ),
        pytest.param(
            "full_look_every = 0\n",
            "",
            "[agent] full_look_every = 0 is not valid: should be greater than or equal to 1",
            id="full looks never",
        ),
        pytest.param(
            "",
            "[metrics]\ntextfile = /nonexistent-dir/nova_orphans.prom\n",
            "[metrics] textfile = /nonexistent-dir/nova_orphans.prom: "
            "directory /nonexistent-dir does not exist",
            id="metrics textfile in a missing directory",
        ),
        pytest.param(
            "jitter = lots\n",
            "",
            "[agent] jitter = lots is not valid",
            id="a float that is not one",
        ),
    ],
)
def test_bad_values_exit_2_before_any_cycle(tmp_path, capsys, world, agent, extra, line):
    config_file = state_conf(tmp_path, agent, extra)
    code, out, err = run(
        capsys, "run", "--once", "--config-file", config_file, "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert len(err) == 1 and err[0].startswith(f"nova-orphans: config error: {config_file}: {line}")
    assert out == ""
    assert not (tmp_path / "state").exists()  # no cycle ran: no journal file


def test_a_metrics_port_in_use_is_one_line_and_creates_nothing(tmp_path, capsys, world):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config_file = state_conf(tmp_path, extra=f"[metrics]\nport = {port}\n")
        code, _, err = run(
            capsys, "run", "--once", "--config-file", config_file, "--libvirt-uri", world
        )
    assert code == exits.USAGE
    assert len(err) == 1 and err[0].startswith(f"nova-orphans: config error: [metrics] port {port}")
    assert not (tmp_path / "state").exists()


def test_the_file_that_set_a_bad_value_is_named_later_files_winning(tmp_path, capsys, world):
    first = write(tmp_path, f"[agent]\ninterval = 60\n{NOVA}", "first.conf")
    second = write(tmp_path, "[agent]\ninterval = 5\n", "second.conf")
    code, _, err = run(
        capsys, "audit", "--config-file", first, "--config-file", second, "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert err == [
        f"nova-orphans: config error: {second}: [agent] interval = 5 is not valid: "
        "should be greater than or equal to 10"
    ]


def test_a_secret_is_never_printed(tmp_path, capsys, world):
    config_file = write(
        tmp_path, "[nova]\nauth_type = password\nauth_url = http://k/v3\npassword = se$cret\n"
    )
    code, _, err = run(capsys, "audit", "--config-file", config_file, "--libvirt-uri", world)
    assert code == exits.USAGE
    assert len(err) == 1 and "[nova] password = ****" in err[0]
    # NOTE: "$cret" would be the end of the password: the reference is not named either.
    assert "$cret" not in err[0] and "its $reference names no option" in err[0]


# ------------------------------------------------------ one strict path for every command


BAD_CONFIGS = [
    ("action_deleted = destroy", "[agent] action_deleted = destroy is not valid"),
    ("interval = 5", "[agent] interval = 5 is not valid"),
    ("grace_period = -5", "[agent] grace_period = -5 is not valid"),
    ("allow_uuids = nope", "[agent] allow_uuids = nope is not valid: 'nope' is not a UUID"),
    ("dryrun = true", "[agent] dryrun is not an option; did you mean dry_run?"),
]

COMMANDS = {
    "audit": ["audit"],
    "run": ["run", "--once"],
    "fleet audit": ["fleet", "audit", "--hosts", HOST],
    "history": ["history"],
    "quarantine list": ["quarantine", "list"],
    "restore": ["restore", "11111111-2222-3333-4444-555555555555"],
    "purge": ["purge", "--older-than", "1"],
}


@pytest.mark.parametrize(("agent", "words"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_the_same_config(tmp_path, capsys, world, command, agent, words):
    config_file = state_conf(tmp_path, agent)
    argv = [*COMMANDS[command], "--config-file", config_file]
    if command in ("audit", "run"):
        argv += ["--libvirt-uri", world]
    code, out, err = run(capsys, *argv)
    assert code == exits.USAGE, err
    assert out == ""
    assert len(err) == 1 and err[0].startswith(f"nova-orphans: config error: {config_file}: ")
    assert words in err[0]
    assert not (tmp_path / "state").exists()


# ------------------------------------------------------------------- unknown groups and keys


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "[agnet]\ndry_run = true\n",
            "[agnet] is not a group; did you mean [agent]?",
            id="a misspelt group",
        ),
        pytest.param(
            "[default]\nhost = cmp-1\n",
            "[default] is not a group; did you mean [DEFAULT]?",
            id="DEFAULT in lower case (oslo.config would ignore it)",
        ),
        pytest.param(
            "[DEFAULT]\ndry_run = true\n",
            "[DEFAULT] dry_run is not an option; it belongs in [agent]",
            id="an option in the wrong group",
        ),
        pytest.param(
            "[libvirt]\nuri = qemu:///system\n",
            "[libvirt] uri is not an option",
            id="no near name",
        ),
        pytest.param(
            "[agent]\nstateDir = /x\n",
            "[agent] stateDir is not an option; did you mean state_dir?",
            id="keys are case-sensitive",
        ),
        pytest.param(
            "[metrics]\nportt = 9100\n",
            "[metrics] portt is not an option; did you mean port?",
            id="metrics",
        ),
        pytest.param(
            "[fleet]\nuri_templat = qemu+tls://{host}/system\n",
            "[fleet] uri_templat is not an option; did you mean uri_template?",
            id="fleet",
        ),
    ],
)
def test_unknown_groups_and_keys_name_the_nearest_valid_one(tmp_path, capsys, world, text, message):
    config_file = write(tmp_path, text + NOVA)
    code, out, err = run(capsys, "audit", "--config-file", config_file, "--libvirt-uri", world)
    assert code == exits.USAGE
    assert out == ""
    assert err == [f"nova-orphans: config error: {config_file}: {message}"]


PASSWORD = (
    "[nova]\nauth_type = password\nauth_url = http://keystone.example/v3\n"
    "username = u\npassword = p\nproject_name = service\n"
    "user_domain_name = Default\nproject_domain_name = Default\n"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            PASSWORD + "usernme = u\n",
            "[nova] usernme is not an option; did you mean username?",
            id="a typo of a password-plugin option",
        ),
        pytest.param(
            PASSWORD + "default_domain_nme = Default\n",
            "[nova] default_domain_nme is not an option; did you mean default_domain_name?",
            id="an option only the generic password plugin has",
        ),
        pytest.param(
            NOVA + "username = u\n",
            "[nova] username is not an option",
            id="an option of another plugin than auth_type's",
        ),
        pytest.param(
            NOVA + "region_nme = RegionOne\n",
            "[nova] region_nme is not an option; did you mean region_name?",
            id="a typo of a keystoneauth adapter option",
        ),
        pytest.param(
            NOVA + "timout = 5\n",
            "[nova] timout is not an option; did you mean timeout?",
            id="a typo of a keystoneauth session option",
        ),
        pytest.param(
            "[nova]\nauth_tpye = password\n",
            "[nova] auth_tpye is not an option; did you mean auth_type?",
            id="a typo of auth_type",
        ),
        pytest.param(
            "[nova]\nauth_type = passwrd\n",
            "[nova] auth_type = passwrd is not a keystoneauth plugin; did you mean password?",
            id="a typo of a plugin name",
        ),
        pytest.param(
            "[nova]\nauth_plugin = password\n",
            "[nova] auth_plugin is not an option any more; it is now called auth_type",
            id="a deprecated keystoneauth name",
        ),
    ],
)
def test_nova_keys_are_ours_and_keystoneauths_for_the_configured_plugin(
    tmp_path, capsys, world, text, message
):
    config_file = write(tmp_path, text)
    code, out, err = run(capsys, "audit", "--config-file", config_file, "--libvirt-uri", world)
    assert code == exits.USAGE
    assert out == ""
    assert err == [f"nova-orphans: config error: {config_file}: {message}"]


def test_a_plugin_outside_the_sample_is_checked_against_its_own_options(tmp_path):
    oidc = (
        "[nova]\nauth_type = v3oidcpassword\nauth_url = http://k/v3\nclient_id = c\n"
        "identity_provider = idp\nprotocol = openid\nusername = u\npassword = p\n"
        "discovery_endpoint = http://k/.well-known/openid-configuration\n"
    )
    assert config.load([write(tmp_path, oidc)]).nova.client_id == "c"
    with pytest.raises(config.ConfigError, match="client_idd is not an option"):
        config.load([write(tmp_path, oidc + "client_idd = c\n")])


def test_nova_conf_is_not_ours_and_never_checked(tmp_path):
    nova_conf = write(
        tmp_path,
        "[DEFAULT]\nhost = cmp-9\nmy_ip = 192.0.2.1\n[libvirt]\nvirt_type = kvm\n[placement]\n",
        "nova.conf",
    )
    loaded = config.load([write(tmp_path, f"[DEFAULT]\nnova_config_file = {nova_conf}\n{NOVA}")])
    assert config.host_settings(loaded).host == "cmp-9"


def test_files_of_the_default_config_directory_are_checked_too(tmp_path):
    directory = tmp_path / "nova-orphans.conf.d"
    directory.mkdir()
    (directory / "10-typo.conf").write_text("[agent]\ndryrun = true\n")
    conf = cfg.ConfigOpts()
    loading.register(conf)
    conf(
        args=[],
        default_config_files=[write(tmp_path, "[agent]\ninterval = 60\n")],
        default_config_dirs=[str(directory)],
    )
    files = strict.ConfigFiles(conf)
    assert [p for p, _ in files.parsed] == [
        str(tmp_path / "nova-orphans.conf"),
        str(directory / "10-typo.conf"),
    ]
    with pytest.raises(
        config.ConfigError, match=r"10-typo.conf: \[agent\] dryrun is not an option"
    ):
        files.check_keys(opts.groups([]))


# ------------------------------------------------------ a valid sample; oslo-config-validator


def full_sample(tmp_path: pathlib.Path) -> str:
    """The committed sample with every option that has a default uncommented, plus credentials."""
    lines = []
    for line in SAMPLE.read_text().splitlines():
        match = re.fullmatch(r"#(\w+) = (.*)", line)
        if match and match.group(2) != "<None>":
            lines.append(f"{match.group(1)} = {match.group(2)}")
        elif line.startswith("["):
            lines.append(line)
    text = "\n".join(lines) + "\n"
    text = text.replace("[nova]\n", "[nova]\n" + PASSWORD.removeprefix("[nova]\n"))
    text = text.replace("[metrics]\n", f"[metrics]\ntextfile = {tmp_path / 'm.prom'}\n")
    return write(tmp_path, text, "full.conf")


def test_a_full_sample_config_loads(tmp_path):
    path = full_sample(tmp_path)
    assert sum(1 for line in pathlib.Path(path).read_text().splitlines() if " = " in line) > 30
    loaded = config.load([path])
    assert loaded.agent.interval == 600 and loaded.nova.auth_type == "password"
    assert loaded.metrics.textfile == str(tmp_path / "m.prom")


def validator(input_file: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(pathlib.Path(sys.executable).parent / "oslo-config-validator"),
            "--namespace",
            "nova_orphans",
            "--namespace",
            "oslo.log",
            "--input-file",
            input_file,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_oslo_config_validator_passes_the_full_sample(tmp_path):
    done = validator(full_sample(tmp_path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("text", "reported"),
    [
        ("[agent]\ndryrun = true\naction_deleted = stop\n", "agent/dryrun"),
        (PASSWORD + "usernme = u\n", "nova/usernme"),
        ("[agnet]\ndry_run = true\n", "agnet/dry_run"),
    ],
    ids=["agent typo", "password-plugin typo", "unknown group"],
)
def test_oslo_config_validator_reports_the_typos_we_refuse(tmp_path, text, reported):
    path = write(tmp_path, text)
    with pytest.raises(config.ConfigError):
        config.load([path])
    done = validator(path)
    assert done.returncode == 1
    assert f"{reported} is not part of the sample config" in done.stderr


def test_a_retention_no_date_can_hold_is_refused_before_any_cycle(tmp_path, capsys, world):
    """``quarantine_retention_days = 3000000`` would crash every cycle after its steps ran.

    docs/design.md rule 11: every value is validated before the first cycle (exit 2).
    """
    config_file = state_conf(tmp_path, "quarantine_retention_days = 3000000\n", "")
    code, out, err = run(
        capsys, "run", "--once", "--config-file", config_file, "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert len(err) == 1 and "quarantine_retention_days = 3000000 is not valid" in err[0]
    assert out == ""
    assert not (tmp_path / "state").exists()
