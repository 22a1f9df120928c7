"""The bad-input tour (``test_bad_input.py``) taken on through what surrounds a command: its
standard streams closed, full or broken, any output encoding, any umask, a journal this user
cannot read and a state directory on read-only media (docs/design.md §10, rule 9).

Each case runs ``nova-orphans`` in a child process and checks: the documented exit code, one
stderr line naming the cause (none when stderr is closed or a success says nothing), nothing
on stdout that breaks its format (JSON only JSON, never an error line), no traceback, and
nothing on disk changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.model import Kind
from nova_orphans.record.journal import Journal
from tests import http_nova
from tests.unit.cli.test_bad_input import fill_in, snapshot

ROOT = pathlib.Path(__file__).parents[3]
OK, ERROR, USAGE, FOUND = exits.OK, exits.ERROR, exits.USAGE, exits.FOUND
TOKEN = "streams-admin-token"
#: What a failed step's detail says in the site's journal: a Latin-1 letter and a snowman.
DETAIL = "disk caf\u00e9 \u2603 busy"
#: A guest named outside ASCII, which Nova does not know (a finding, exit 3).
GUEST = "g\u00e4st-\u2603"
#: The encodings a command may be given: as named, and through a C locale uncoerced.
ASCII = {"PYTHONIOENCODING": "ascii"}
LATIN1 = {"PYTHONIOENCODING": "latin-1"}
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
#: Without the capabilities that let root read and write any file: as another user.
AS_A_USER = (
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
    "--",
)


@dataclasses.dataclass(frozen=True)
class Case:
    """``argv`` (``{conf}``, ``{world}``, ``{tmp}`` filled in) run with each stream as said:
    ``stdin`` ``open|closed``, ``stdout`` ``pipe|closed|full|broken``, ``stderr``
    ``pipe|closed|full``; ``words`` in the one stderr line (None: no stderr line at all);
    ``out`` what stdout holds: ``empty``, ``json`` or ``text`` (with ``shows`` in it)."""

    name: str
    argv: tuple[str, ...]
    code: int
    words: tuple[str, ...] | None
    stdin: str = "open"
    stdout: str = "pipe"
    stderr: str = "pipe"
    out: str = "empty"
    shows: tuple[bytes, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    umask: int | None = None
    as_a_user: bool = False
    prepare: str = ""
    cloud: bool = False
    agent: str = ""


def case(name: str, argv: str, code: int, words: tuple[str, ...] | None, **kw) -> object:
    env = tuple(sorted(kw.pop("env", {}).items()))
    return pytest.param(Case(name, tuple(argv.split()), code, words, env=env, **kw), id=name)


C = "--config-file {conf}"
W = "--libvirt-uri {world}"
CLOSED_OUT = ("standard output is closed",)
FULL_OUT = ("standard output", "No space left on device")
BROKEN_OUT = ("standard output", "Broken pipe")
DENIED = ("permission denied",)
READ_ONLY = ("read-only file system",)

STREAM_CASES = [
    # Standard output closed, full (/dev/full) or broken (its reader gone).
    case("report-schema: stdout closed", "report-schema", ERROR, CLOSED_OUT, stdout="closed"),
    case("demo: stdout closed", "demo", ERROR, CLOSED_OUT, stdout="closed"),
    case(
        "demo --format json: stdout closed",
        "demo --format json",
        ERROR,
        CLOSED_OUT,
        stdout="closed",
    ),
    case(
        "history: stdout closed",
        f"history {C}",
        ERROR,
        CLOSED_OUT,
        stdout="closed",
        prepare="detail",
    ),
    case("--version: stdout closed", "--version", ERROR, CLOSED_OUT, stdout="closed"),
    case("sample-config: stdout full", "sample-config", ERROR, FULL_OUT, stdout="full"),
    case("demo: stdout full", "demo", ERROR, FULL_OUT, stdout="full"),
    case("alert-rules: stdout full", "alert-rules", ERROR, FULL_OUT, stdout="full"),
    case("--version: stdout full", "--version", ERROR, FULL_OUT, stdout="full"),
    case("history: stdout full", f"history {C}", ERROR, FULL_OUT, stdout="full", prepare="detail"),
    case(
        "quarantine list --format json: stdout full",
        f"quarantine list {C} --format json",
        ERROR,
        FULL_OUT,
        stdout="full",
    ),
    case(
        "demo --format json: stdout broken",
        "demo --format json",
        ERROR,
        BROKEN_OUT,
        stdout="broken",
    ),
    case("report-schema: stdout broken", "report-schema", ERROR, BROKEN_OUT, stdout="broken"),
    case(
        "grafana-dashboard: stdout broken", "grafana-dashboard", ERROR, BROKEN_OUT, stdout="broken"
    ),
    # Standard error closed or full: the error is lost, never printed on stdout.
    case("unknown command: stderr closed", "frobnicate", USAGE, None, stderr="closed"),
    case("audit, Nova down: stderr closed", f"audit {C} {W}", ERROR, None, stderr="closed"),
    case(
        "demo --format json: stderr closed",
        "demo --format json",
        exits.SHARED_VOLUME,
        None,
        stderr="closed",
        out="json",
    ),
    case(
        "history --format json: stderr closed",
        f"history {C} --format json",
        OK,
        None,
        stderr="closed",
        out="json",
        prepare="detail",
    ),
    case("unknown command: stderr full", "frobnicate", USAGE, None, stderr="full"),
    case(
        "demo --format json: stderr full",
        "demo --format json",
        exits.SHARED_VOLUME,
        None,
        stderr="full",
        out="json",
    ),
    case("demo: stdout and stderr closed", "demo", ERROR, None, stdout="closed", stderr="closed"),
    case(
        "report-schema: stdout broken, stderr closed",
        "report-schema",
        ERROR,
        None,
        stdout="broken",
        stderr="closed",
    ),
    # Standard input closed.
    case(
        "purge: stdin closed",
        f"purge {C} --older-than 1",
        OK,
        None,
        stdin="closed",
        out="text",
        shows=(b"nothing to purge",),
    ),
    case(
        "history --format json: stdin closed",
        f"history {C} --format json",
        OK,
        None,
        stdin="closed",
        out="json",
    ),
    case(
        "fleet audit --reports -: stdin closed",
        f"fleet audit {C} --reports -",
        ERROR,
        ("standard input is closed",),
        stdin="closed",
    ),
    case(
        "audit, Nova down: all three closed",
        f"audit {C} {W}",
        ERROR,
        None,
        stdin="closed",
        stdout="closed",
        stderr="closed",
    ),
    # The log: a file that cannot be written is one line, never logging's tracebacks.
    case(
        "history --debug --log-file /dev/full",
        f"history --debug {C} --log-file /dev/full",
        OK,
        ("log /dev/full not written", "No space left on device"),
        out="text",
        prepare="detail",
    ),
    case(
        "audit --debug --log-file /dev/full",
        f"audit --debug {C} {W} --log-file /dev/full",
        FOUND,
        ("log /dev/full not written",),
        out="text",
        cloud=True,
    ),
]

ENCODING_CASES = [
    case(
        "history: ascii",
        f"history {C} --wide",
        OK,
        None,
        env=ASCII,
        out="text",
        shows=(b"caf\\xe9 \\u2603",),
        prepare="detail",
    ),
    case(
        "history: latin-1",
        f"history {C} --wide",
        OK,
        None,
        env=LATIN1,
        out="text",
        shows=(b"caf\xe9 \\u2603",),
        prepare="detail",
    ),
    case(
        "history: C locale",
        f"history {C} --wide",
        OK,
        None,
        env=C_LOCALE,
        out="text",
        shows=(b"\\u2603",),
        prepare="detail",
    ),
    case(
        "history --format json: ascii",
        f"history {C} --format json",
        OK,
        None,
        env=ASCII,
        out="json",
        prepare="detail",
    ),
    case(
        "audit: a missing config named in Latin-1, ascii",
        f"audit --config-file {{tmp}}/caf\u00e9.conf {W}",
        USAGE,
        ("caf\\xe9.conf",),
        env=ASCII,
    ),
    case(
        "audit: a missing config named in Latin-1, latin-1",
        f"audit --config-file {{tmp}}/caf\u00e9\u2603.conf {W}",
        USAGE,
        ("\\u2603.conf",),
        env=LATIN1,
    ),
    case(
        "audit: a guest named outside ASCII, ascii",
        f"audit {C} {W}",
        FOUND,
        None,
        env=ASCII,
        out="text",
        shows=(b"g\\xe4st-\\u2603",),
        cloud=True,
    ),
    case(
        "audit: a guest named outside ASCII, latin-1",
        f"audit {C} {W} --wide",
        FOUND,
        None,
        env=LATIN1,
        out="text",
        shows=(b"g\xe4st-\\u2603",),
        cloud=True,
    ),
    case(
        "audit: a guest named outside ASCII, C locale",
        f"audit {C} {W}",
        FOUND,
        None,
        env=C_LOCALE,
        out="text",
        shows=(b"\\u2603",),
        cloud=True,
    ),
    case(
        "audit --format json: a guest named outside ASCII, ascii",
        f"audit {C} {W} --format json",
        FOUND,
        None,
        env=ASCII,
        out="json",
        cloud=True,
    ),
    case(
        "audit --format json: a guest named outside ASCII, C locale",
        f"audit {C} {W} --format json",
        FOUND,
        None,
        env=C_LOCALE,
        out="json",
        cloud=True,
    ),
]

UMASK_CASES = [
    case(
        f"{argv.split()[0]}: bad input under umask {mask:04o}",
        argv,
        code,
        words,
        umask=mask,
        agent=agent,
    )
    for mask in (0o000, 0o077, 0o777)
    for argv, code, words, agent in (
        (f"run --once {C} {W}", USAGE, ("obliterate",), "action_deleted = obliterate\n"),
        (f"history {C} --limit 0", USAGE, ("--limit",), ""),
    )
]

ACCESS_CASES = [
    # A journal this user cannot read, or a state directory it cannot enter or write.
    case(
        "history: journal unreadable",
        f"history {C}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="journal unreadable",
    ),
    case(
        "history: state directory closed",
        f"history {C}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="state closed",
    ),
    case(
        "quarantine list: journal unreadable",
        f"quarantine list {C}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="journal unreadable",
    ),
    case(
        "release: journal unreadable",
        f"release {C} 11111111-2222-3333-4444-555555555555",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="journal unreadable",
    ),
    case(
        "run --once: journal read-only",
        f"run --once {C} {W}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="journal read-only",
    ),
    case(
        "run --once: journal unreadable",
        f"run --once {C} {W}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="journal unreadable",
    ),
    case(
        "run --once: state directory closed",
        f"run --once {C} {W}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="state closed",
    ),
    case(
        "audit: journal unreadable",
        f"audit {C} {W}",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="journal unreadable",
        cloud=True,
    ),
    case(
        "purge: state directory read-only",
        f"purge {C} --older-than 1",
        USAGE,
        DENIED,
        as_a_user=True,
        prepare="state read-only",
    ),
]

READ_ONLY_CASES = [
    case("run --once: state on read-only media", f"run --once {C} {W}", USAGE, READ_ONLY),
    case(
        "release: state on read-only media",
        f"release {C} 11111111-2222-3333-4444-555555555555",
        USAGE,
        READ_ONLY,
    ),
    case("purge: state on read-only media", f"purge {C} --older-than 1", USAGE, READ_ONLY),
    case(
        "history: a crash's WAL on read-only media",
        f"history {C} --format json",
        OK,
        ("write-ahead log", "not shown"),
        out="json",
        prepare="wal",
    ),
]


def _detail(site: pathlib.Path) -> None:
    """A failed stop in the site's journal whose detail is not ASCII."""
    journal = Journal(str(site / "state" / "journal.sqlite"))
    now = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    try:
        intent = journal.begin(worlds.random_uuid(), Kind.DELETED, "stop", False, now)
        journal.finish(intent, "failed", DETAIL, now)
    finally:
        journal.close()


def _wal(site: pathlib.Path) -> None:
    """A journal whose last event is only in its WAL, as an agent killed mid-way leaves it:
    the journal and its WAL copied while a connection holds them, put back once it closed."""
    _detail(site)
    path = site / "state" / "journal.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(
        "INSERT INTO intents (uuid, kind, step, dry_run, started_at) VALUES "
        "('33333333-2222-4333-8444-555555555555', 'deleted', 'stop', 0, "
        "'2026-01-03T00:00:00+00:00')"
    )
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{path}{suffix}", f"{path}.crash{suffix}")
    db.close()
    for suffix in ("", "-wal"):
        os.replace(f"{path}.crash{suffix}", f"{path}{suffix}")
    assert (path.parent / "journal.sqlite-wal").stat().st_size > 0


#: What changes modes only (put back after the command, before the comparison).
UNREADABLE = ("journal unreadable", "journal read-only", "state closed", "state read-only")

PREPARE = {
    "detail": _detail,
    "wal": _wal,
    "journal unreadable": lambda site: (site / "state" / "journal.sqlite").chmod(0),
    "journal read-only": lambda site: (site / "state" / "journal.sqlite").chmod(0o400),
    "state closed": lambda site: (site / "state").chmod(0),
    "state read-only": lambda site: (site / "state").chmod(0o500),
}


@pytest.fixture
def cloud(site: pathlib.Path) -> Iterator[http_nova.Cloud]:
    """Nova over HTTP knowing the host and none of its guests; the site's world holds
    ``GUEST`` (a finding, exit 3)."""
    nova = SimulatedNova()
    compute = nova.add_compute("cmp-1", **worlds.test_driver_node())
    domain = worlds.node_domain(
        uuid=worlds.random_uuid(), name=GUEST, metadata=worlds.nova_metadata()
    )
    worlds.write_node_file(site, [domain])
    with http_nova.serve(nova, "unused-password", TOKEN) as served:
        served.node_uuid = compute.node_uuid  # type: ignore[attr-defined]
        yield served


def conf_text(site: pathlib.Path, c: Case, endpoint: str, node: str = "") -> str:
    pinned = f"compute_node_uuid = {node}\n" if node else ""
    return (
        f"[DEFAULT]\nhost = cmp-1\n{pinned}[agent]\nstate_dir = {site / 'state'}\n{c.agent}"
        f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\ntoken = {TOKEN}\ntimeout = 2\n"
    )


def run_child(c: Case, argv: list[str], site: pathlib.Path) -> tuple[int, bytes, bytes]:
    """Run ``nova-orphans ARGV`` with the streams, environment and umask ``c`` says."""
    out_file, err_file = site.parent / "child.out", site.parent / "child.err"
    opened: list[int] = []

    def stream(kind: str, path: pathlib.Path) -> int | None:
        if kind == "pipe":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        elif kind == "full":
            fd = os.open("/dev/full", os.O_WRONLY)
        elif kind == "broken":
            reader, fd = os.pipe()
            os.close(reader)
        else:
            return None
        opened.append(fd)
        return fd

    stdout, stderr = stream(c.stdout, out_file), stream(c.stderr, err_file)
    closing = [fd for fd, kind in ((0, c.stdin), (1, c.stdout), (2, c.stderr)) if kind == "closed"]

    def child_setup() -> None:
        if c.umask is not None:
            os.umask(c.umask)
        for fd in closing:
            os.close(fd)

    env = {**os.environ, "PYTHONPATH": str(ROOT), **dict(c.env)}
    try:
        done = subprocess.run(
            [*(AS_A_USER if c.as_a_user else ()), sys.executable, "-m", "nova_orphans.cli", *argv],
            stdin=subprocess.DEVNULL if c.stdin == "open" else None,
            stdout=stdout,
            stderr=stderr,
            env=env,
            preexec_fn=child_setup,
            timeout=120,
        )
    finally:
        for fd in opened:
            os.close(fd)
    read = lambda p, kind: p.read_bytes() if kind == "pipe" and p.exists() else b""  # noqa: E731
    return done.returncode, read(out_file, c.stdout), read(err_file, c.stderr)


def check(c: Case, site: pathlib.Path, endpoint: str, node: str = "") -> None:
    conf = site / "etc" / "nova-orphans.conf"
    conf.write_text(conf_text(site, c, endpoint, node))
    world_uri = f"test://{site / 'node.xml'}"
    fill = {"conf": str(conf), "world": world_uri, "tmp": str(site)}
    argv = [fill_in(a, fill) for a in c.argv]
    modes = {p: p.stat().st_mode for p in (site / "state", site / "state" / "journal.sqlite")}
    if c.prepare:
        PREPARE[c.prepare](site)
    before = snapshot(site)
    try:
        code, out, err = run_child(c, argv, site)
    finally:
        for path, mode in modes.items():
            with contextlib.suppress(OSError):
                path.chmod(mode)
    if c.prepare in UNREADABLE:
        before = {
            name: (modes[site / name], digest) if site / name in modes else (mode, digest)
            for name, (mode, digest) in before.items()
        }
    text = err.decode("utf-8", "replace")
    assert code == c.code, text
    assert b"Traceback" not in err and b"Traceback" not in out, text
    lines = text.strip().splitlines()
    if c.words is None:
        assert lines == [], text
    else:
        assert len(lines) == 1, text
        assert lines[0].startswith("nova-orphans: ") or "WARNING" in lines[0], lines[0]
        for word in c.words:
            assert fill_in(word, fill) in lines[0], lines[0]
    if c.out == "empty":
        assert out == b"", out[:200]
    elif c.out == "json":
        json.loads(out.decode("ascii"))
    else:
        assert b"nova-orphans:" not in out
        for shown in c.shows:
            assert shown in out, out[-2000:]
    assert snapshot(site) == before
    (site.parent / "child.out").unlink(missing_ok=True)
    (site.parent / "child.err").unlink(missing_ok=True)


@pytest.mark.parametrize("c", STREAM_CASES + ENCODING_CASES + UMASK_CASES + ACCESS_CASES)
def test_streams_encodings_umasks_and_access(site, c, request):
    if c.cloud:
        cloud = request.getfixturevalue("cloud")
        check(c, site, cloud.url, cloud.node_uuid)
    else:
        check(c, site, "http://127.0.0.1:1/v2.1")


@pytest.fixture
def read_only_site(site: pathlib.Path) -> Iterator[pathlib.Path]:
    """The site's state directory on a read-only bind mount (read-only media: root too)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    subprocess.run(["mount", "--bind", str(site / "state"), str(site / "state")], check=True)
    try:
        yield site
    finally:
        subprocess.run(["umount", str(site / "state")], check=True)


@pytest.mark.parametrize("c", READ_ONLY_CASES)
def test_a_state_directory_on_read_only_media(read_only_site, c):
    site = read_only_site
    if c.prepare:
        PREPARE[c.prepare](site)
    remount = ["mount", "-o", "remount,bind,ro", str(site / "state")]
    subprocess.run(remount, check=True)
    check(dataclasses.replace(c, prepare=""), site, "http://127.0.0.1:1/v2.1")


def test_the_tour_has_forty_cases_of_streams_encodings_umasks_and_access():
    cases = STREAM_CASES + ENCODING_CASES + UMASK_CASES + ACCESS_CASES + READ_ONLY_CASES
    assert len(cases) >= 40


MODES = {
    "state": 0o700,
    "state/quarantine": 0o700,
    "state/journal.sqlite": 0o600,
    "state/journal.sqlite-wal": 0o600,
    "state/journal.sqlite-shm": 0o600,
    "state/journal.sqlite.lock": 0o600,
    "out/metrics.prom": 0o644,
    "out/report.json": 0o600,
    "run/live.lock": 0o600,
}


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o277])
def test_every_file_and_directory_made_has_its_mode_whatever_the_umask(tmp_path, cloud, umask):
    """``run --once`` on a fresh host: the state directory, quarantine, journal (and its WAL),
    locks, metrics textfile and report file each get the mode docs/admin documents."""
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "out").mkdir()
    conf = tmp_path / "etc" / "agent.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 'fresh' / 'state'}\n"
        f"report_file = {tmp_path / 'out' / 'report.json'}\n"
        f"live_lock_file = {tmp_path / 'fresh' / 'run' / 'live.lock'}\n"
        f"[metrics]\ntextfile = {tmp_path / 'out' / 'metrics.prom'}\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {cloud.url}\ntoken = {TOKEN}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OS_AGENT__LIVE_LOCK_FILE"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_orphans.cli",
            "run",
            "--once",
            "--config-file",
            str(conf),
            "--libvirt-uri",
            f"test://{tmp_path / 'node.xml'}",
        ],
        capture_output=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: os.umask(umask),
        timeout=120,
    )
    assert done.returncode == FOUND, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    found = {}
    for name in MODES:
        path = tmp_path / ("fresh/" + name if not name.startswith("out/") else name)
        if path.exists():
            found[name] = stat.S_IMODE(path.stat().st_mode)
    expected = {name: mode for name, mode in MODES.items() if name in found}
    assert found == expected
    assert {"state", "state/journal.sqlite", "out/metrics.prom", "out/report.json"} <= set(found)
