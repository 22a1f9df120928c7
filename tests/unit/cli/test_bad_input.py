"""A tour of bad input through every sub-command (docs/design.md rule 9).

For each case: the documented exit code, nothing on stdout, exactly one stderr line
starting ``nova-orphans:`` and naming the cause, and nothing on disk changed (the
whole test directory — configs, state directory with its journal and quarantine,
nova.conf, log directory — is compared before and after).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import pathlib
import socket
from collections.abc import Iterator

import pytest

from nova_orphans import cli, exits
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.journal import Journal

UNKNOWN_UUID = "11111111-2222-3333-4444-555555555555"
NOVA_DOWN = "http://127.0.0.1:1/v2.1"
USAGE, ERROR = exits.USAGE, exits.ERROR


@dataclasses.dataclass(frozen=True)
class Case:
    """``argv`` and the config (``default``, ``agent``, ``nova`` sections' extra lines);
    ``{conf}``, ``{world}``, ``{tmp}`` and ``{port}`` (a port in use) in them are filled in
    by the test."""

    name: str
    argv: tuple[str, ...]
    code: int
    words: tuple[str, ...]
    default: str = ""
    agent: str = ""
    nova: str = f"auth_type = admin_token\nendpoint = {NOVA_DOWN}\ntoken = t\ntimeout = 2\n"


def case(name, argv, code, *words, **conf):
    return pytest.param(Case(name, tuple(argv.split()), code, words, **conf), id=name)


C = "--config-file {conf}"
W = "--libvirt-uri {world}"
KEYSTONE_DOWN = (
    "auth_type = password\nauth_url = http://127.0.0.1:1/v3\nusername = u\npassword = p\n"
    "project_name = s\nuser_domain_name = Default\nproject_domain_name = Default\ntimeout = 2\n"
)

CASES = [
    # The command line itself.
    case("no command", "", USAGE, "usage error"),
    case("unknown command", "frobnicate", USAGE, "usage error", "frobnicate"),
    case("audit: unknown format", f"audit {C} {W} --format xml", USAGE, "'xml'"),
    case("audit: unknown flag", f"audit {C} {W} --no-such-flag", USAGE, "--no-such-flag"),
    case("audit: empty --host", f"audit {C} {W} --host=", USAGE, "--host must not be empty"),
    case("audit: empty --libvirt-uri", f"audit {C} --libvirt-uri=", USAGE, "--libvirt-uri"),
    case(
        "audit: relative test world",
        f"audit {C} --libvirt-uri test://relative.xml",
        USAGE,
        "test driver takes an absolute file",
    ),
    case("audit: unknown driver", f"audit {C} --libvirt-uri foo://bar", USAGE, "'foo'", "driver"),
    case(
        "audit: unknown transport",
        f"audit {C} --libvirt-uri qemu+sss://h/system",
        USAGE,
        "'sss'",
        "transport",
    ),
    case(
        "audit: missing test world",
        f"audit {C} --libvirt-uri test:///{{tmp}}/missing.xml",
        ERROR,
        "libvirt",
        "missing.xml",
    ),
    case(
        "audit: libvirt unreachable",
        f"audit {C} --libvirt-uri qemu+tcp://127.0.0.1:1/system",
        ERROR,
        "libvirt",
        "127.0.0.1:1",
    ),
    case(
        "audit: missing config file",
        f"audit --config-file {{tmp}}/none.conf {W}",
        USAGE,
        "none.conf",
    ),
    # The config file.
    case("audit: config not INI", f"audit {C} {W}", USAGE, "config error", default="[oops\n"),
    case(
        "audit: [nova] timeout = soon",
        f"audit {C} {W}",
        USAGE,
        "[nova] timeout = soon is not valid",
        nova="auth_type = admin_token\nendpoint = http://x\ntoken = t\ntimeout = soon\n",
    ),
    case(
        "audit --debug: [nova] timeout = soon",
        f"audit --debug {C} {W}",
        USAGE,
        "[nova] timeout = soon",
        nova="auth_type = admin_token\nendpoint = http://x\ntoken = t\ntimeout = soon\n",
    ),
    case("audit: misspelt option", f"audit {C} {W}", USAGE, "dryrun", agent="dryrun = true\n"),
    case("audit: no credentials", f"audit {C} {W}", USAGE, "auth_type", nova=""),
    case(
        "audit: unknown auth plugin", f"audit {C} {W}", USAGE, "magic", nova="auth_type = magic\n"
    ),
    case("audit: Nova unreachable", f"audit {C} {W}", ERROR, "Nova unreachable", "127.0.0.1:1"),
    case(
        "audit: Keystone unreachable",
        f"audit {C} {W}",
        ERROR,
        "Keystone unreachable",
        "127.0.0.1:1/v3",
        nova=KEYSTONE_DOWN,
    ),
    case(
        "audit: missing nova.conf",
        f"audit {C} {W}",
        USAGE,
        "{tmp}/etc/none/nova.conf",
        default="nova_config_file = {tmp}/etc/none/nova.conf\n",
    ),
    case(
        "audit: nova.conf refers to an option we do not read",
        f"audit {C} {W}",
        USAGE,
        "$pybasedir",
        default="nova_config_file = {tmp}/etc/nova-pybasedir.conf\n",
    ),
    case(
        "audit: missing nova config directory",
        f"audit {C} {W}",
        USAGE,
        "nova_config_dir",
        default="nova_config_dir = {tmp}/etc/nova.conf.d\n",
    ),
    case(
        "audit: log file in a missing directory",
        f"audit {C} {W}",
        USAGE,
        "log_file",
        default="log_file = {tmp}/no-such-dir/nova-orphans.log\n",
    ),
    case(
        "audit: missing logging config",
        f"audit {C} {W}",
        USAGE,
        "log_config_append",
        default="log_config_append = {tmp}/etc/logging.conf\n",
    ),
    case(
        "audit: configured unknown driver",
        f"audit {C}",
        USAGE,
        "'foo'",
        default="[libvirt]\nconnection_uri = foo://bar\n",
    ),
    # demo
    case("demo: unknown format", "demo --format xml", USAGE, "'xml'"),
    case("demo: unknown flag", "demo --host x", USAGE, "--host"),
    # run
    case(
        "run: unknown action",
        f"run --once {C} {W}",
        USAGE,
        "obliterate",
        agent="action_deleted = obliterate\n",
    ),
    case("run: empty --host", f"run --once {C} {W} --host=", USAGE, "--host must not be empty"),
    case("run: unknown driver", f"run --once {C} --libvirt-uri foo://bar", USAGE, "'foo'"),
    case(
        "run: quarantine cannot be created",
        f"run --once {C} {W}",
        USAGE,
        "quarantine directory",
        agent="quarantine_dir = /etc/hostname/q\n",
    ),
    case(
        "run: metrics textfile in a missing directory",
        f"run --once {C} {W}",
        USAGE,
        "textfile",
        default="[metrics]\ntextfile = {tmp}/no-such-dir/m.prom\n",
    ),
    case(
        "run: metrics port in use",
        f"run --once {C} {W}",
        USAGE,
        "[metrics] port {port}",
        default="[metrics]\nport = {port}\n",
    ),
    case("run: interval = 1", f"run --once {C} {W}", USAGE, "interval", agent="interval = 1\n"),
    # history
    case(
        "history: mistyped state directory",
        f"history {C}",
        USAGE,
        "no journal",
        "{tmp}/stat",
        agent="state_dir = {tmp}/stat\n",
    ),
    case("history: --limit -1", f"history {C} --limit -1", USAGE, "--limit", "'-1'"),
    case("history: --limit many", f"history {C} --limit many", USAGE, "--limit", "'many'"),
    case("history: --uuid not a UUID", f"history {C} --uuid 1234", USAGE, "'1234' is not a UUID"),
    # quarantine list
    case("quarantine: no verb", "quarantine", USAGE, "usage error"),
    case(
        "quarantine list: mistyped state directory",
        f"quarantine list {C}",
        USAGE,
        "no journal",
        agent="state_dir = {tmp}/stat\n",
    ),
    case("quarantine list: unknown format", f"quarantine list {C} --format csv", USAGE, "'csv'"),
    # restore
    case("restore: not a UUID", f"restore {C} not-a-uuid", USAGE, "'not-a-uuid' is not a UUID"),
    case(
        "restore: unknown UUID",
        f"restore {C} {UNKNOWN_UUID}",
        USAGE,
        f"no restorable quarantine entry for {UNKNOWN_UUID}",
    ),
    case(
        "restore: mistyped state directory",
        f"restore {C} {UNKNOWN_UUID}",
        USAGE,
        "no journal",
        agent="state_dir = {tmp}/stat\n",
    ),
    case("restore: empty --host", f"restore {C} {UNKNOWN_UUID} --host=", USAGE, "--host"),
    # release
    case("release: not a UUID", f"release {C} nope", USAGE, "'nope' is not a UUID"),
    case("release: a guest not on hold", f"release {C} {UNKNOWN_UUID}", USAGE, "not on hold"),
    case(
        "release: mistyped state directory",
        f"release {C} {UNKNOWN_UUID}",
        USAGE,
        "not on hold",
        agent="state_dir = {tmp}/stat\n",
    ),
    # purge
    case("purge: no --older-than", f"purge {C}", USAGE, "--older-than"),
    case("purge: --older-than nan", f"purge {C} --older-than nan", USAGE, "between 0 and"),
    case("purge: --older-than inf", f"purge {C} --older-than inf", USAGE, "between 0 and"),
    case("purge: --older-than -1", f"purge {C} --older-than -1", USAGE, "between 0 and"),
    case("purge: --older-than soon", f"purge {C} --older-than soon", USAGE, "'soon'"),
    case(
        "purge: mistyped state directory",
        f"purge {C} --older-than 1",
        USAGE,
        "no journal",
        agent="state_dir = {tmp}/stat\n",
    ),
    # the shipped files
    case("sample-config: unknown flag", "sample-config --wide", USAGE, "--wide"),
    case(
        "systemd-unit: relative executable",
        "systemd-unit --executable bin/nova-orphans",
        USAGE,
        "not an absolute path",
    ),
    case(
        "systemd-unit: executable with a quote",
        "systemd-unit --executable=/opt/it's/nova-orphans",
        USAGE,
        "without blanks",
    ),
    case(
        "systemd-unit: missing executable",
        "systemd-unit --executable {tmp}/bin/nova-orphans",
        USAGE,
        "no executable nova-orphans at {tmp}/bin/nova-orphans",
    ),
    # fleet audit
    case("fleet: no verb", "fleet", USAGE, "usage error"),
    case(
        "fleet audit: template without {host}",
        f"fleet audit {C} --uri-template qemu:///system",
        USAGE,
        "{host}",
    ),
    case(
        "fleet audit: template with unknown driver",
        f"fleet audit {C} --uri-template foo://{{host}}/x",
        USAGE,
        "'foo'",
    ),
    case("fleet audit: --concurrency 0", f"fleet audit {C} --concurrency 0", USAGE, "'0'"),
    case("fleet audit: --timeout nan", f"fleet audit {C} --timeout nan", USAGE, "'nan'"),
    case(
        "fleet audit: --reports missing",
        f"fleet audit {C} --reports {{tmp}}/none",
        USAGE,
        "{tmp}/none",
    ),
    case(
        "fleet audit: --max-age nan",
        f"fleet audit {C} --reports {{tmp}} --max-age nan",
        USAGE,
        "'nan'",
    ),
    case("fleet audit: --hosts ,", f"fleet audit {C} --hosts ,", USAGE, "no host names"),
    case(
        "fleet audit: Nova unreachable", f"fleet audit {C} --hosts cmp-1", ERROR, "Nova unreachable"
    ),
]


@pytest.fixture
def site(tmp_path: pathlib.Path) -> pathlib.Path:
    """A host's files: our config directory, nova's, a state directory with a journal."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "nova-pybasedir.conf").write_text("[DEFAULT]\ninstances_path = $pybasedir/i\n")
    state = tmp_path / "state"
    (state / "quarantine").mkdir(parents=True, mode=0o700)
    Journal(str(state / "journal.sqlite")).close()
    worlds.write_world(
        tmp_path,
        [
            worlds.node_domain(
                uuid=worlds.random_uuid(), name="i-1", metadata=worlds.nova_metadata()
            )
        ],
    )
    return tmp_path


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A local port something else listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def write_conf(site: pathlib.Path, c: Case, port: int) -> str:
    fill = {"tmp": str(site), "port": str(port)}
    text = (
        "[DEFAULT]\nhost = cmp-1\n"
        + fill_in(c.default, fill)
        + f"\n[agent]\nstate_dir = {site / 'state'}\n"
        + fill_in(c.agent, fill)
        + "\n[nova]\n"
        + c.nova
    )
    path = site / "etc" / "nova-orphans.conf"
    # NOTE: oslo.config keeps the last state_dir of a section: a case's own wins.
    path.write_text(text)
    return str(path)


def fill_in(text: str, fill: dict[str, str]) -> str:
    """``text`` with ``{conf}``, ``{world}``, ``{tmp}``, ``{port}`` replaced (``{host}`` stays)."""
    for name, value in fill.items():
        text = text.replace("{" + name + "}", value)
    return text


def snapshot(root: pathlib.Path) -> dict[str, tuple[int, str]]:
    """Every path under ``root`` with its mode and content digest."""
    gc.collect()  # NOTE: a journal left open by a failing command closes (its WAL goes).
    return {
        str(p.relative_to(root)): (
            p.stat().st_mode,
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "",
        )
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("c", CASES)
def test_bad_input_is_one_line_the_documented_code_and_changes_nothing(site, busy_port, capsys, c):
    conf = write_conf(site, c, busy_port)
    fill = {"conf": conf, "world": f"test://{site / 'node.xml'}", "tmp": str(site),
            "port": str(busy_port)}  # fmt: skip
    argv = [fill_in(a, fill) for a in c.argv]
    before = snapshot(site)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == c.code, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nova-orphans: "), lines[0]
    assert "Traceback" not in err
    for word in c.words:
        assert fill_in(word, fill) in lines[0], lines[0]
    assert snapshot(site) == before


def test_the_tour_covers_every_sub_command_with_forty_cases():
    commands = {c.values[0].argv[0] if c.values[0].argv else "" for c in CASES}
    assert {
        "audit",
        "run",
        "demo",
        "history",
        "quarantine",
        "restore",
        "purge",
        "fleet",
    } <= commands
    assert len(CASES) >= 40
