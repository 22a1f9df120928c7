"""Bad input gives one clear line on stderr, the documented exit code, and changes nothing
(docs/design.md rule 9).

First a tour of bad input through every sub-command. For each case: the documented exit
code, nothing on stdout, exactly one stderr line starting ``nova-orphans:`` and naming the
cause, and nothing on disk changed (the whole test directory — configs, state directory
with its journal and quarantine, nova.conf, log directory — is compared before and after).
Then the cases the tour cannot table: bad configs of ``audit`` and ``run``, unreachable
libvirt, Nova and cells, the console script, and the journal commands.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import pathlib
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable

import pytest

from nova_orphans import cli, exits
from nova_orphans.cli import audit as audit_cli
from nova_orphans.cli import common
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.record.entries import SCHEMA_VERSION

UNKNOWN_UUID = "11111111-2222-3333-4444-555555555555"
NOVA_DOWN = "http://127.0.0.1:1/v2.1"
USAGE, ERROR = exits.USAGE, exits.ERROR


@dataclasses.dataclass(frozen=True)
class Case:
    """``argv`` and the config (``default``, ``agent``, ``nova`` sections' extra lines);
    ``{conf}``, ``{world}``, ``{tmp}``, ``{port}`` (a port in use) and ``{keystone}`` (a
    Keystone answering ``{keystone}/<status>/v3`` with that status) in them are filled in
    by the test."""

    name: str
    argv: tuple[str, ...]
    code: int
    words: tuple[str, ...]
    default: str = ""
    agent: str = ""
    nova: str = f"auth_type = admin_token\nendpoint = {NOVA_DOWN}\ntoken = t\ntimeout = 2\n"
    #: A name of ``PREPARE``: what to lay on disk before the command runs.
    prepare: str = ""
    #: Environment variables set for the command (``{tmp}`` filled in).
    env: tuple[tuple[str, str], ...] = ()
    #: Words the line must not hold (a Keystone failure is never Nova's).
    absent: tuple[str, ...] = ()


def case(name, argv, code, *words, **conf):
    return pytest.param(Case(name, tuple(argv.split()), code, words, **conf), id=name)


C = "--config-file {conf}"
W = "--libvirt-uri {world}"
KEYSTONE_DOWN = (
    "auth_type = password\nauth_url = http://127.0.0.1:1/v3\nusername = u\npassword = p\n"
    "project_name = s\nuser_domain_name = Default\nproject_domain_name = Default\ntimeout = 2\n"
)

CHECK = f"check-config {C}"
TOKEN = f"auth_type = admin_token\nendpoint = {NOVA_DOWN}\ntoken = t\ntimeout = 2\n"
#: The generic password plugin (it discovers the identity API first) at ``{url}``.
KEYSTONE = "auth_type = password\nauth_url = {url}\nusername = u\npassword = p\ntimeout = 2\n"
#: The v3 password plugin (no discovery) at ``{url}``.
V3 = (
    "auth_type = v3password\nauth_url = {url}\nusername = u\npassword = p\nproject_name = s\n"
    "user_domain_name = Default\nproject_domain_name = Default\ntimeout = 2\n"
)
PW_PLUGIN = "[nova] auth_type = password"
NO_PASSWORD = "auth_type = password\nauth_url = http://k/v3\nusername = u\nproject_name = p\n"
CLOUDS = (("OS_CLIENT_CONFIG_FILE", "{tmp}/clouds.yaml"),)

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
    # Numbers no clock, timer or database can hold.
    case("history: --limit 10**30", f"history {C} --limit {10**30}", USAGE, "--limit", "at most"),
    case("history: --limit 0", f"history {C} --limit 0", USAGE, "--limit", "'0'"),
    case("history: --limit 1e3", f"history {C} --limit 1e3", USAGE, "'1e3' is not a whole"),
    case(
        "fleet audit: --concurrency 10**30",
        f"fleet audit {C} --concurrency {10**30}",
        USAGE,
        "--concurrency",
        "at most",
    ),
    case("fleet audit: --concurrency 2000", f"fleet audit {C} --concurrency 2000", USAGE, "1024"),
    case("fleet audit: --timeout 1e300", f"fleet audit {C} --timeout 1e300", USAGE, "at most"),
    case("fleet audit: --timeout 1e999", f"fleet audit {C} --timeout 1e999", USAGE, "finite"),
    case(
        "fleet audit: --max-age 10**40",
        f"fleet audit {C} --reports {{tmp}} --max-age {10**40}",
        USAGE,
        "--max-age",
    ),
    case("purge: --older-than 1e400", f"purge {C} --older-than 1e400", USAGE, "between 0 and"),
    case(
        "run: [agent] interval = 10**30",
        f"run --once {C} {W}",
        USAGE,
        "[agent] interval",
        agent=f"interval = {10**30}\n",
    ),
    case(
        "run: [agent] grace_period = 10**30",
        f"run --once {C} {W}",
        USAGE,
        "grace_period",
        agent=f"grace_period = {10**30}\n",
    ),
    case(
        "run: [agent] stop_timeout = 10**30",
        f"run --once {C} {W}",
        USAGE,
        "stop_timeout",
        agent=f"stop_timeout = {10**30}\n",
    ),
    case(
        "fleet audit: [fleet] concurrency = 10**30",
        f"fleet audit {C} --hosts cmp-1",
        USAGE,
        "[fleet] concurrency",
        default=f"[fleet]\nconcurrency = {10**30}\n",
    ),
    case(
        "fleet audit: [fleet] timeout = 1e300",
        f"fleet audit {C} --hosts cmp-1",
        USAGE,
        "[fleet] timeout",
        default="[fleet]\ntimeout = 1e300\n",
    ),
    case(
        "audit: [nova] timeout = 10**30",
        f"audit {C} {W}",
        USAGE,
        "[nova] timeout",
        nova=f"auth_type = admin_token\nendpoint = {NOVA_DOWN}\ntoken = t\ntimeout = {10**30}\n",
    ),
    # URI templates: only {host}, checked before any host is tried.
    case(
        "fleet audit: template with {x}",
        f"fleet audit {C} --hosts cmp-1 --uri-template qemu+ssh://{{host}}/{{x}}",
        USAGE,
        "--uri-template",
        "{x} is not a placeholder",
    ),
    case(
        "fleet audit: template with a lone brace",
        f"fleet audit {C} --hosts cmp-1 --uri-template qemu+ssh://{{host}}/{{",
        USAGE,
        "unmatched brace",
    ),
    case(
        "fleet audit: template with {host!r}",
        f"fleet audit {C} --hosts cmp-1 --uri-template qemu+ssh://{{host!r}}/system",
        USAGE,
        "{host!r}",
    ),
    case(
        "fleet audit: template with {0}",
        f"fleet audit {C} --hosts cmp-1 --uri-template qemu+ssh://{{0}}/system",
        USAGE,
        "{0}",
    ),
    case(
        "fleet audit: [fleet] uri_template with {region}",
        f"fleet audit {C} --hosts cmp-1",
        USAGE,
        "[fleet] uri_template",
        "{region}",
        default="[fleet]\nuri_template = qemu+ssh://{host}/{region}\n",
    ),
    # --config-dir and --log-file.
    case(
        "audit: missing --config-dir",
        f"audit {C} {W} --config-dir {{tmp}}/none",
        USAGE,
        "--config-dir",
        "{tmp}/none",
    ),
    case(
        "audit: --config-dir is a file",
        f"audit {C} {W} --config-dir {{conf}}",
        USAGE,
        "--config-dir",
    ),
    case(
        "history: --config-dir with a non-UTF-8 file",
        f"history {C} --config-dir {{tmp}}/conf.d",
        USAGE,
        "{tmp}/conf.d/bad.conf",
        "line 2",
        prepare="bad conf.d",
    ),
    case(
        "audit: --log-file in a missing directory",
        f"audit {C} {W} --log-file {{tmp}}/none/x.log",
        USAGE,
        "--log-file",
    ),
    case(
        "history: --log-file is a directory",
        f"history {C} --log-file {{tmp}}/etc",
        USAGE,
        "--log-file",
    ),
    # Files that are no config file, or not UTF-8.
    case(
        "audit: non-UTF-8 config",
        f"audit {C} {W}",
        USAGE,
        "line 3",
        "not UTF-8",
        prepare="non-UTF-8 conf",
    ),
    case(
        "run: non-UTF-8 config", f"run --once {C} {W}", USAGE, "not UTF-8", prepare="non-UTF-8 conf"
    ),
    case("history: non-UTF-8 config", f"history {C}", USAGE, "not UTF-8", prepare="non-UTF-8 conf"),
    case(
        "fleet audit: non-UTF-8 config",
        f"fleet audit {C}",
        USAGE,
        "not UTF-8",
        prepare="non-UTF-8 conf",
    ),
    case(
        "audit: non-UTF-8 nova.conf",
        f"audit {C} {W}",
        USAGE,
        "{tmp}/etc/nova.conf",
        "not UTF-8",
        default="nova_config_file = {tmp}/etc/nova.conf\n",
        prepare="non-UTF-8 nova.conf",
    ),
    case(
        "audit: config is a FIFO",
        f"audit --config-file {{tmp}}/fifo {W}",
        USAGE,
        "a FIFO",
        prepare="fifo",
    ),
    case(
        "history: config is a FIFO",
        "history --config-file {tmp}/fifo",
        USAGE,
        "a FIFO",
        prepare="fifo",
    ),
    case(
        "run: config is a FIFO",
        f"run --once --config-file {{tmp}}/fifo {W}",
        USAGE,
        "a FIFO",
        prepare="fifo",
    ),
    case(
        "audit: config is /dev/zero",
        f"audit --config-file /dev/zero {W}",
        USAGE,
        "character device",
    ),
    case(
        "purge: config is /dev/null",
        "purge --config-file /dev/null --older-than 1",
        USAGE,
        "character device",
    ),
    case(
        "audit: config is a directory", f"audit --config-file {{tmp}}/etc {W}", USAGE, "a directory"
    ),
    case(
        "audit: nova_config_file is a FIFO",
        f"audit {C} {W}",
        USAGE,
        "{tmp}/fifo",
        "a FIFO",
        default="nova_config_file = {tmp}/fifo\n",
        prepare="fifo",
    ),
    case(
        "audit: nova_config_dir holds a FIFO",
        f"audit {C} {W}",
        USAGE,
        "a FIFO",
        default="nova_config_dir = {tmp}/nova.d\n",
        prepare="fifo in nova.d",
    ),
    # oslo.log's options are named in their file, never as a command-line flag.
    case(
        "audit: debug = maybe",
        f"audit {C} {W}",
        USAGE,
        "[DEFAULT] debug = maybe",
        default="debug = maybe\n",
    ),
    case(
        "run: debug = maybe",
        f"run --once {C} {W}",
        USAGE,
        "[DEFAULT] debug = maybe",
        default="debug = maybe\n",
    ),
    case(
        "history: use_stderr = perhaps",
        f"history {C}",
        USAGE,
        "use_stderr = perhaps",
        default="use_stderr = perhaps\n",
    ),
    case(
        "history --debug: debug = maybe",
        f"history --debug {C}",
        USAGE,
        "[DEFAULT] debug = maybe",
        default="debug = maybe\n",
    ),
    # Journals of another schema, or no journal at all.
    case(
        "history: journal of a newer schema",
        f"history {C}",
        USAGE,
        f"schema version {SCHEMA_VERSION + 1}",
        prepare="newer journal",
    ),
    case(
        "quarantine list: journal of a newer schema",
        f"quarantine list {C}",
        USAGE,
        f"schema version {SCHEMA_VERSION + 1}",
        prepare="newer journal",
    ),
    case(
        "restore: journal of a newer schema",
        f"restore {C} {UNKNOWN_UUID}",
        USAGE,
        f"schema version {SCHEMA_VERSION + 1}",
        prepare="newer journal",
    ),
    case(
        "release: journal of a newer schema",
        f"release {C} {UNKNOWN_UUID}",
        USAGE,
        f"schema version {SCHEMA_VERSION + 1}",
        prepare="newer journal",
    ),
    case(
        "purge: journal of a newer schema",
        f"purge {C} --older-than 1",
        USAGE,
        f"schema version {SCHEMA_VERSION + 1}",
        prepare="newer journal",
    ),
    case(
        "run: journal of a newer schema",
        f"run --once {C} {W}",
        USAGE,
        f"schema version {SCHEMA_VERSION + 1}",
        prepare="newer journal",
    ),
    case(
        "history: journal that is no database",
        f"history {C}",
        USAGE,
        "journal.sqlite",
        prepare="garbage journal",
    ),
    case(
        "quarantine list: journal that is no database",
        f"quarantine list {C}",
        USAGE,
        "journal.sqlite",
        prepare="garbage journal",
    ),
    # More of the command line.
    case("sample-config: --config-file", "sample-config --config-file x", USAGE, "--config-file"),
    case("nova-policy: --format", "nova-policy --format json", USAGE, "--format"),
    case("demo: --format yaml", "demo --wide --format yaml", USAGE, "'yaml'"),
    case(
        "fleet audit: --max-age without --reports",
        f"fleet audit {C} --max-age 5",
        USAGE,
        "--max-age applies only with --reports",
    ),
    case(
        "fleet audit: --reports with --uri-template",
        f"fleet audit {C} --reports {{tmp}} --uri-template q://{{host}}/x",
        USAGE,
        "not with --reports",
    ),
    # FIFOs where a file is written or a journal read: refused, never waited on.
    case(
        "fleet audit: --metrics-textfile is a FIFO",
        f"fleet audit {C} --hosts cmp-1 --metrics-textfile {{tmp}}/fifo",
        USAGE,
        "--metrics-textfile",
        "a FIFO",
        prepare="fifo",
    ),
    case(
        "run: [metrics] textfile is a FIFO",
        f"run --once {C} {W}",
        USAGE,
        "textfile",
        "a FIFO",
        default="[metrics]\ntextfile = {tmp}/fifo\n",
        prepare="fifo",
    ),
    case(
        "run: journal_path is a FIFO",
        f"run --once {C} {W}",
        USAGE,
        "{tmp}/fifo is not a regular file",
        agent="journal_path = {tmp}/fifo\n",
        prepare="fifo",
    ),
    case(
        "restore: journal_path is a FIFO",
        f"restore {C} {UNKNOWN_UUID}",
        USAGE,
        "{tmp}/fifo is not a regular file",
        agent="journal_path = {tmp}/fifo\n",
        prepare="fifo",
    ),
    case("quarantine: unknown verb", "quarantine show", USAGE, "'show'"),
    case("fleet: unknown verb", "fleet scan", USAGE, "'scan'"),
    # Credentials and endpoints: every option handed to keystoneauth, openstacksdk or oslo.log
    # is checked at load, for every command; check-config refuses what audit and run refuse.
    case("check-config: empty file", CHECK, USAGE, "[nova] needs auth_type", prepare="empty conf"),
    case(
        "run: empty file",
        f"run --once {C} {W}",
        USAGE,
        "[nova] needs auth_type",
        prepare="empty conf",
    ),
    case("check-config: no credentials", CHECK, USAGE, "[nova] needs auth_type", nova=""),
    case("check-config: unknown plugin", CHECK, USAGE, "magic", nova="auth_type = magic\n"),
    case(
        "audit: no password", f"audit {C} {W}", USAGE, PW_PLUGIN, "needs password", nova=NO_PASSWORD
    ),
    case("check-config: no password", CHECK, USAGE, PW_PLUGIN, "needs password", nova=NO_PASSWORD),
    case("run: no password", f"run --once {C} {W}", USAGE, "needs password", nova=NO_PASSWORD),
    case("history: no password", f"history {C}", USAGE, "needs password", nova=NO_PASSWORD),
    case(
        "audit: no username",
        f"audit {C} {W}",
        USAGE,
        "needs username or user_id",
        nova="auth_type = v3password\nauth_url = http://k/v3\npassword = p\n",
    ),
    case(
        "audit: no auth_url",
        f"audit {C} {W}",
        USAGE,
        "needs auth_url",
        nova="auth_type = password\nusername = u\npassword = p\n",
    ),
    case(
        "audit: admin_token without token",
        f"audit {C} {W}",
        USAGE,
        "needs token",
        nova="auth_type = admin_token\nendpoint = http://nova/v2.1\n",
    ),
    case(
        "audit: admin_token without endpoint",
        f"audit {C} {W}",
        USAGE,
        "needs endpoint or endpoint_override",
        nova="auth_type = admin_token\ntoken = t\n",
    ),
    case(
        "check-config: token plugin without token",
        CHECK,
        USAGE,
        "auth_type = v3token",
        "needs token",
        nova="auth_type = v3token\nauth_url = http://k/v3\n",
    ),
    case(
        "audit: application credential without secret",
        f"audit {C} {W}",
        USAGE,
        "needs application_credential_secret",
        nova="auth_type = v3applicationcredential\nauth_url = http://k/v3\n"
        "application_credential_id = a\n",
    ),
    case(
        "audit: [nova] timeout = 0",
        f"audit {C} {W}",
        USAGE,
        "[nova] timeout = 0 is not valid",
        nova=TOKEN + "timeout = 0\n",
    ),
    case(
        "check-config: [nova] timeout = 0",
        CHECK,
        USAGE,
        "[nova] timeout = 0",
        nova=TOKEN + "timeout = 0\n",
    ),
    case(
        "run: [nova] timeout = -1",
        f"run --once {C} {W}",
        USAGE,
        "[nova] timeout = -1",
        nova=TOKEN + "timeout = -1\n",
    ),
    case(
        "audit: [nova] timeout = nan",
        f"audit {C} {W}",
        USAGE,
        "[nova] timeout = nan",
        nova=TOKEN + "timeout = nan\n",
    ),
    case(
        "check-config: [nova] timeout = inf",
        CHECK,
        USAGE,
        "[nova] timeout = inf",
        nova=TOKEN + "timeout = inf\n",
    ),
    case(
        "audit: auth_url htp://",
        f"audit {C} {W}",
        USAGE,
        "[nova] auth_url = htp://k/v3",
        "http:// or https://",
        nova=KEYSTONE.format(url="htp://k/v3"),
    ),
    case(
        "check-config: auth_url htp://",
        CHECK,
        USAGE,
        "[nova] auth_url = htp://k/v3",
        nova=KEYSTONE.format(url="htp://k/v3"),
    ),
    case(
        "run: auth_url without a host",
        f"run --once {C} {W}",
        USAGE,
        "[nova] auth_url",
        "with a host",
        nova=KEYSTONE.format(url="http:///v3"),
    ),
    case(
        "audit: auth_url with port 99999",
        f"audit {C} {W}",
        USAGE,
        "[nova] auth_url",
        "out of range",
        nova=KEYSTONE.format(url="http://k:99999/v3"),
    ),
    case(
        "audit: endpoint without a scheme",
        f"audit {C} {W}",
        USAGE,
        "[nova] endpoint =",
        nova="auth_type = admin_token\nendpoint = nova.example/v2.1\ntoken = t\n",
    ),
    case(
        "audit: endpoint_override ftp://",
        f"audit {C} {W}",
        USAGE,
        "[nova] endpoint_override = ftp://nova",
        nova=TOKEN + "endpoint_override = ftp://nova\n",
    ),
    case(
        "audit: cafile missing",
        f"audit {C} {W}",
        USAGE,
        "[nova] cafile = {tmp}/none.pem",
        "No such file",
        nova=TOKEN + "cafile = {tmp}/none.pem\n",
    ),
    case(
        "check-config: cafile missing",
        CHECK,
        USAGE,
        "[nova] cafile",
        nova=TOKEN + "cafile = {tmp}/none.pem\n",
    ),
    case(
        "run: cafile no certificate",
        f"run --once {C} {W}",
        USAGE,
        "[nova] cafile",
        "OpenSSL",
        nova=TOKEN + "cafile = {tmp}/etc/text.pem\n",
        prepare="text pem",
    ),
    case(
        "audit: cafile a directory",
        f"audit {C} {W}",
        USAGE,
        "[nova] cafile",
        "a directory",
        nova=TOKEN + "cafile = {tmp}/etc\n",
    ),
    case(
        "audit: cafile a FIFO",
        f"audit {C} {W}",
        USAGE,
        "[nova] cafile",
        "a FIFO",
        nova=TOKEN + "cafile = {tmp}/fifo\n",
        prepare="fifo",
    ),
    case(
        "audit: certfile missing",
        f"audit {C} {W}",
        USAGE,
        "[nova] certfile",
        nova=TOKEN + "certfile = {tmp}/none.pem\n",
    ),
    case(
        "check-config: certfile no certificate",
        CHECK,
        USAGE,
        "[nova] certfile",
        "OpenSSL",
        nova=TOKEN + "certfile = {tmp}/etc/text.pem\n",
        prepare="text pem",
    ),
    case(
        "audit: keyfile without certfile",
        f"audit {C} {W}",
        USAGE,
        "[nova] keyfile",
        "only with certfile",
        nova=TOKEN + "keyfile = {tmp}/etc/text.pem\n",
        prepare="text pem",
    ),
    case(
        "audit: insecure with cafile",
        f"audit {C} {W}",
        USAGE,
        "[nova] cafile",
        "insecure",
        nova=TOKEN + "insecure = true\ncafile = {tmp}/etc/text.pem\n",
        prepare="text pem",
    ),
    case(
        "audit: tls_ciphers none",
        f"audit {C} {W}",
        USAGE,
        "[nova] tls_ciphers = NOPE",
        nova=TOKEN + "tls_ciphers = NOPE\n",
    ),
    case(
        "audit: valid_interfaces publik",
        f"audit {C} {W}",
        USAGE,
        "[nova] valid_interfaces",
        "'publik'",
        nova=TOKEN + "valid_interfaces = publik\n",
    ),
    case(
        "audit: version with min_version",
        f"audit {C} {W}",
        USAGE,
        "keystoneauth refused",
        nova=TOKEN + "version = 2.1\nmin_version = 2.0\n",
    ),
    case(
        "audit: cloud and auth_type",
        f"audit {C} {W}",
        USAGE,
        "[nova] cloud = c",
        "auth_type = admin_token",
        nova="cloud = c\n" + TOKEN,
    ),
    case(
        "check-config: cloud and auth_type",
        CHECK,
        USAGE,
        "cloud = c",
        "auth_type",
        nova="cloud = c\n" + TOKEN,
    ),
    case(
        "run: cloud and auth_type",
        f"run --once {C} {W}",
        USAGE,
        "cloud = c",
        "auth_type",
        nova="cloud = c\n" + TOKEN,
    ),
    case(
        "audit: clouds a list",
        f"audit {C} {W}",
        USAGE,
        "{tmp}/clouds.yaml",
        "'clouds' should be a mapping",
        nova="cloud = c\n",
        prepare="clouds a list",
        env=CLOUDS,
    ),
    case(
        "check-config: clouds a list",
        CHECK,
        USAGE,
        "'clouds' should be a mapping",
        nova="cloud = c\n",
        prepare="clouds a list",
        env=CLOUDS,
    ),
    case(
        "run: clouds a list",
        f"run --once {C} {W}",
        USAGE,
        "'clouds' should be a mapping",
        nova="cloud = c\n",
        prepare="clouds a list",
        env=CLOUDS,
    ),
    case(
        "audit: cloud not in clouds.yaml",
        f"audit {C} {W}",
        USAGE,
        "[nova] cloud = nope",
        "has no cloud 'nope'",
        nova="cloud = nope\n",
        prepare="clouds",
        env=CLOUDS,
    ),
    case(
        "check-config: OS_CLOUD not in clouds.yaml",
        CHECK,
        USAGE,
        "OS_CLOUD",
        "'nope'",
        nova="",
        prepare="clouds",
        env=(*CLOUDS, ("OS_CLOUD", "nope")),
    ),
    case(
        "audit: clouds.yaml not YAML",
        f"audit {C} {W}",
        USAGE,
        "{tmp}/clouds.yaml",
        "cannot be read",
        nova="cloud = c\n",
        prepare="clouds not YAML",
        env=CLOUDS,
    ),
    case(
        "audit: clouds.yaml a list",
        f"audit {C} {W}",
        USAGE,
        "should be a mapping with 'clouds'",
        nova="cloud = c\n",
        prepare="clouds.yaml a list",
        env=CLOUDS,
    ),
    case(
        "audit: a cloud that is a string",
        f"audit {C} {W}",
        USAGE,
        "clouds.c should be a mapping",
        nova="cloud = c\n",
        prepare="cloud a string",
        env=CLOUDS,
    ),
    case(
        "audit: a cloud's auth_url htp://",
        f"audit {C} {W}",
        USAGE,
        "clouds.c.auth.auth_url",
        nova="cloud = c\n",
        prepare="cloud htp",
        env=CLOUDS,
    ),
    case(
        "history: a cloud's cacert missing",
        f"history {C}",
        USAGE,
        "clouds.c.cacert",
        nova="cloud = c\n",
        prepare="cloud cacert",
        env=CLOUDS,
    ),
    case(
        "audit: Keystone 401",
        f"audit {C} {W}",
        ERROR,
        "Keystone (the identity service)",
        "{keystone}/401/v3",
        "HTTP 401",
        absent=("Nova refused", "Nova:"),
        nova=V3.format(url="{keystone}/401/v3"),
    ),
    case(
        "audit: Keystone 500",
        f"audit {C} {W}",
        ERROR,
        "Keystone (the identity service)",
        "{keystone}/500/v3",
        "HTTP 500",
        absent=("Nova:",),
        nova=V3.format(url="{keystone}/500/v3"),
    ),
    case(
        "audit: Keystone 503",
        f"audit {C} {W}",
        ERROR,
        "Keystone (the identity service)",
        "{keystone}/503/v3",
        "HTTP 503",
        absent=("Nova:",),
        nova=V3.format(url="{keystone}/503/v3"),
    ),
    case(
        "audit: Keystone 401 to discovery",
        f"audit {C} {W}",
        ERROR,
        "Keystone (the identity service)",
        "{keystone}/401/v3",
        "401",
        absent=("Nova refused",),
        nova=KEYSTONE.format(url="{keystone}/401/v3"),
    ),
    case(
        "audit: Keystone 500 to discovery",
        f"audit {C} {W}",
        ERROR,
        "Keystone (the identity service)",
        "{keystone}/500/v3",
        "HTTP 500",
        absent=("Nova:",),
        nova=KEYSTONE.format(url="{keystone}/500/v3"),
    ),
    case(
        "fleet audit: Keystone 503",
        f"fleet audit {C} --hosts cmp-1",
        ERROR,
        "Keystone (the identity service)",
        "503",
        absent=("Nova:",),
        nova=V3.format(url="{keystone}/503/v3"),
    ),
    case(
        "fleet audit: Keystone 401",
        f"fleet audit {C} --hosts cmp-1",
        ERROR,
        "Keystone",
        "{keystone}/401/v3",
        absent=("Nova refused",),
        nova=V3.format(url="{keystone}/401/v3"),
    ),
    case(
        "audit: default_log_levels foo",
        f"audit {C} {W}",
        USAGE,
        "[DEFAULT] default_log_levels = foo is not valid",
        default="default_log_levels = foo\n",
    ),
    case(
        "check-config: default_log_levels LOUD",
        CHECK,
        USAGE,
        "default_log_levels",
        "'a=LOUD'",
        default="default_log_levels = a=LOUD\n",
    ),
    case(
        "history: default_log_levels =x",
        f"history {C}",
        USAGE,
        "default_log_levels",
        default="default_log_levels = =INFO\n",
    ),
    case(
        "run: syslog_log_facility LOG_FOO",
        f"run --once {C} {W}",
        USAGE,
        "syslog_log_facility",
        default="syslog_log_facility = LOG_FOO\nuse_syslog = true\n",
    ),
    case(
        "audit: a log format cut short",
        f"audit {C} {W}",
        USAGE,
        "logging_default_format_string",
        default="logging_default_format_string = %(asctime\n",
    ),
    case(
        "check-config: 4 KiB of NUL bytes", CHECK, USAGE, "line 1", "NUL byte", prepare="NUL conf"
    ),
    case(
        "check-config: quarantine under a file",
        CHECK,
        USAGE,
        "quarantine directory /etc/hostname/q: /etc/hostname is not a directory",
        agent="quarantine_dir = /etc/hostname/q\n",
    ),
    case(
        "audit: [services] endpoint port 99999",
        f"audit {C} {W}",
        USAGE,
        "[services] placement_endpoint = http://p:99999",
        "out of range",
        default="[services]\nplacement_endpoint = http://p:99999\n",
    ),
    case(
        "check-config: auth_section",
        CHECK,
        USAGE,
        "[nova] auth_section = other is not used",
        nova=TOKEN + "auth_section = other\n",
    ),
    case(
        "audit: [nova] version abc",
        f"audit {C} {W}",
        USAGE,
        "[nova] version = abc is not valid",
        nova=TOKEN + "version = abc\n",
    ),
    case(
        "check-config: min_version above max_version",
        CHECK,
        USAGE,
        "[nova] min_version = 2.1",
        "above max_version",
        nova=TOKEN + "min_version = 2.1\nmax_version = 2.0\n",
    ),
    case(
        "run: log_rotate_interval = 0",
        f"run --once {C} {W}",
        USAGE,
        "[DEFAULT] log_rotate_interval = 0 is not valid",
        default="log_rotate_interval = 0\n",
    ),
    case(
        "audit: max_logfile_size_mb = -1",
        f"audit {C} {W}",
        USAGE,
        "max_logfile_size_mb = -1",
        default="max_logfile_size_mb = -1\n",
    ),
    case("run: 4 KiB of NUL bytes", f"run --once {C} {W}", USAGE, "NUL byte", prepare="NUL conf"),
    case("audit: 4 KiB of NUL bytes", f"audit {C} {W}", USAGE, "NUL byte", prepare="NUL conf"),
    case(
        "audit: a 20,000-character action",
        f"audit {C} {W}",
        USAGE,
        "action_deleted",
        "characters more",
        agent=f"action_deleted = {'x' * 20000}\n",
    ),
    case(
        "check-config: an escape in auth_type",
        CHECK,
        USAGE,
        "\\x1b[31mmagic",
        nova="auth_type = \x1b[31mmagic\n",
    ),
]


def _non_utf8_conf(site: pathlib.Path) -> None:
    conf = site / "etc" / "nova-orphans.conf"
    lines = conf.read_bytes().split(b"\n")
    conf.write_bytes(b"\n".join([*lines[:2], b"# caf\xe9 (Latin-1)", *lines[2:]]))


def _bad_conf_d(site: pathlib.Path) -> None:
    (site / "conf.d").mkdir()
    (site / "conf.d" / "bad.conf").write_bytes(b"[DEFAULT]\n# \xff\n")


def _newer_journal(site: pathlib.Path) -> None:
    db = sqlite3.connect(site / "state" / "journal.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()


def _fifo_in_nova_d(site: pathlib.Path) -> None:
    (site / "nova.d").mkdir()
    os.mkfifo(site / "nova.d" / "nova.conf")


def _clouds(text: str) -> Callable[[pathlib.Path], object]:
    return lambda site: (site / "clouds.yaml").write_text(text)


CLOUD = "clouds:\n  c:\n    auth_type: admin_token\n    auth:\n      token: t\n"

#: What a case lays on disk before it runs (after its config is written).
PREPARE = {
    "empty conf": lambda site: (site / "etc" / "nova-orphans.conf").write_bytes(b""),
    "NUL conf": lambda site: (site / "etc" / "nova-orphans.conf").write_bytes(b"\0" * 4096),
    "text pem": lambda site: (site / "etc" / "text.pem").write_text("no certificate\n"),
    "clouds": _clouds(CLOUD),
    "clouds a list": _clouds("clouds:\n  - c\n  - d\n"),
    "clouds not YAML": _clouds("clouds: [c\n"),
    "clouds.yaml a list": _clouds("- clouds\n"),
    "cloud a string": _clouds("clouds:\n  c: admin_token\n"),
    "cloud htp": _clouds(CLOUD + "      auth_url: htp://k/v3\n"),
    "cloud cacert": _clouds(CLOUD + "    cacert: /nonexistent/ca.pem\n"),
    "non-UTF-8 conf": _non_utf8_conf,
    "non-UTF-8 nova.conf": lambda site: (site / "etc" / "nova.conf").write_bytes(
        b"[DEFAULT]\nhost = caf\xe9\n"
    ),
    "bad conf.d": _bad_conf_d,
    "fifo": lambda site: os.mkfifo(site / "fifo"),
    "fifo in nova.d": _fifo_in_nova_d,
    "newer journal": _newer_journal,
    "garbage journal": lambda site: (site / "state" / "journal.sqlite").write_bytes(
        b"this is no sqlite database, only text long enough for a header " * 8
    ),
}


def write_case_conf(site: pathlib.Path, c: Case, port: int, keystone: str = "") -> str:
    fill = {"tmp": str(site), "port": str(port), "keystone": keystone}
    text = (
        "[DEFAULT]\nhost = cmp-1\n"
        + fill_in(c.default, fill)
        + f"\n[agent]\nstate_dir = {site / 'state'}\n"
        + fill_in(c.agent, fill)
        + "\n[nova]\n"
        + fill_in(c.nova, fill)
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


def lay_out(site: pathlib.Path, c: Case, port: int, keystone: str, monkeypatch) -> dict[str, str]:
    """Write the case's config, lay its files out, set its environment; return the fill-ins."""
    conf = write_case_conf(site, c, port, keystone)
    if c.prepare:
        PREPARE[c.prepare](site)
    fill = {
        "conf": conf,
        "world": f"test://{site / 'node.xml'}",
        "tmp": str(site),
        "port": str(port),
        "keystone": keystone,
    }
    for name, value in c.env:
        monkeypatch.setenv(name, fill_in(value, fill))
    return fill


def the_one_line(c: Case, fill: dict[str, str], err: str) -> str:
    """The one stderr line, checked: ours, no traceback, no ``None``, bounded and escaped."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("nova-orphans: "), line
    assert "Traceback" not in err
    # NOTE: Python's None is no answer an operator can act on ("(None interface, ...)").
    assert not re.search(r"\bNone\b", line), line
    assert len(line) <= len("nova-orphans: ") + common.MAX_LINE, len(line)
    assert not any(ch < " " or ch == "\x7f" for ch in line), line
    for word in c.words:
        assert fill_in(word, fill) in line, line
    for word in c.absent:
        assert fill_in(word, fill) not in line, line
    return line


@pytest.mark.parametrize("c", CASES)
def test_bad_input_is_one_line_the_documented_code_and_changes_nothing(
    site, busy_port, keystone, monkeypatch, capsys, c
):
    fill = lay_out(site, c, busy_port, keystone, monkeypatch)
    argv = [fill_in(a, fill) for a in c.argv]
    before = snapshot(site)
    code = run_with_alarm(argv)
    out, err = capsys.readouterr()
    assert code == c.code, err
    assert out == ""
    the_one_line(c, fill, err)
    assert snapshot(site) == before


#: The options a case of only a config may give on its command line.
CONFIG_ONLY = {"--once", "--config-file", "{conf}", "--libvirt-uri", "{world}", *W.split()}

#: The config-only cases check-config accepts although their command refuses them: what
#: they refuse is no option's value but the host's state when the command runs.
REFUSED_ONLY_WHEN_RUN = {
    "run: metrics port in use": "the port is bound when the agent starts",
    "history: mistyped state directory": "a journal command reads the journal there",
    "run: journal of a newer schema": "the journal is opened when the command runs",
    "history: journal of a newer schema": "the journal is opened when the command runs",
    "history: journal that is no database": "the journal is opened when the command runs",
    "run: journal_path is a FIFO": "the journal is opened when the command runs",
}

#: The bad configs only run refuses (check-config refuses them for it): audit needs none of it.
REFUSED_BY_RUN_ONLY = {
    "run: quarantine cannot be created": "audit makes no quarantine",
    "check-config: quarantine under a file": "audit makes no quarantine",
}

BAD_CONFIGS = [
    p
    for p in CASES
    if p.values[0].code == USAGE
    and p.values[0].argv[:1] in (("audit",), ("run",), ("check-config",), ("history",))
    and set(p.values[0].argv[1:]) <= CONFIG_ONLY
]


@pytest.mark.parametrize("c", BAD_CONFIGS)
def test_check_config_refuses_exactly_what_audit_and_run_refuse(
    site, busy_port, keystone, monkeypatch, capsys, c
):
    """Every bad config of the tour: check-config, audit and run --once give the same exit
    code and the same line, naming the same option (the Ansible role's ``validate`` step
    relies on it: the agent must never start on a file check-config passed)."""
    fill = lay_out(site, c, busy_port, keystone, monkeypatch)
    conf = ["--config-file", fill["conf"]]
    # NOTE: a case without --libvirt-uri is about the configured one.
    world = ["--libvirt-uri", fill["world"]] if "--libvirt-uri" in c.argv else []
    before = snapshot(site)
    checked = run_with_alarm(["check-config", *conf])
    out, err = capsys.readouterr()
    if c.name in REFUSED_ONLY_WHEN_RUN:
        assert checked == exits.OK, err
        return
    assert checked == USAGE, out + err
    assert out == ""
    line = the_one_line(c, fill, err)
    for argv in (["audit", *conf, *world], ["run", "--once", *conf, *world]):
        code = run_with_alarm(argv)
        out, err = capsys.readouterr()
        if argv[0] == "audit" and c.name in REFUSED_BY_RUN_ONLY:
            assert "config error" not in err, err
            continue
        assert (code, out) == (USAGE, ""), err
        assert the_one_line(c, fill, err) == line, argv
    assert snapshot(site) == before


def test_the_tour_holds_the_bad_configs_of_credentials_and_endpoints():
    """The tour covers each way [nova]'s credentials and endpoints can be wrong, and so
    does the comparison of check-config with audit and run."""
    names = {p.values[0].name for p in CASES}
    assert len(CASES) >= 169
    kinds = ("password", "timeout", "auth_url", "cafile", "cloud and auth_type", "clouds",
             "Keystone", "default_log_levels", "NUL")  # fmt: skip
    for kind in kinds:
        assert sum(kind in n for n in names) >= 3, kind
    assert len(BAD_CONFIGS) >= 60


def run_with_alarm(argv: list[str]) -> int:
    """``cli.main(argv)``, failed after 60 s: a FIFO or a device must not hang a command."""

    def hung(*_: object) -> None:
        raise AssertionError(f"nova-orphans {' '.join(argv)} hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        return cli.main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_tour_covers_every_sub_command_with_a_hundred_cases():
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
        "release",
        "sample-config",
        "systemd-unit",
        "nova-policy",
    } <= commands
    assert len(CASES) >= 100


# --- Bad configs and unreachable services, one command at a time. ----------------------


def write_conf(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / "nova-orphans.conf"
    path.write_text(text)
    return str(path)


def good_conf(tmp_path: pathlib.Path, endpoint: str = NOVA_DOWN, extra: str = "") -> str:
    return write_conf(
        tmp_path,
        "[DEFAULT]\nhost = cmp-1\n" + extra + "[nova]\nauth_type = admin_token\n"
        f"endpoint = {endpoint}\ntoken = admin:admin\ntimeout = 2\n",
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nova-orphans: ")
    for word in words:
        assert word in lines[0]


CONFIG_CASES = [
    ("a config file that is not INI", "this is [not\n= an ini file", "config error"),
    (
        "an option with a wrong value",
        "[nova]\nauth_type = admin_token\ntimeout = soon\n",
        "timeout",
    ),
    ("no Nova credentials at all", "[DEFAULT]\nhost = cmp-1\n", "auth_type"),
    ("an unknown keystoneauth plugin", "[nova]\nauth_type = magic\n", "magic"),
    (
        "a deny-listed UUID that is not one",
        "[DEFAULT]\ndeny_uuids = 1234\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "not a UUID",
    ),
    (
        "a pinned compute node UUID that is not one",
        "[DEFAULT]\ncompute_node_uuid = cmp-1\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "[DEFAULT] compute_node_uuid = cmp-1 is not valid: 'cmp-1' is not a UUID",
    ),
    (
        "an empty pinned compute node UUID",
        "[DEFAULT]\ncompute_node_uuid =\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "compute_node_uuid",
    ),
    (
        "a nova.conf that does not exist",
        "[DEFAULT]\nnova_config_file = /nonexistent/nova.conf\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "nova.conf",
    ),
]


@pytest.mark.parametrize(("text", "words"), [pytest.param(*c[1:], id=c[0]) for c in CONFIG_CASES])
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, world, text, words):
    code, out, err = run(
        capsys, "audit", "--config-file", write_conf(tmp_path, text), "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert out == ""
    assert_one_line(err, words)


def test_a_missing_config_file_exits_2(capsys, world):
    code, _, err = run(
        capsys, "audit", "--config-file", "/nonexistent.conf", "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert_one_line(err, "/nonexistent.conf")


@pytest.mark.parametrize(
    "argv",
    [["frobnicate"], ["audit", "--format", "xml"], ["audit", "--no-such-flag"], []],
    ids=["unknown command", "unknown format", "unknown flag", "no command"],
)
def test_bad_command_line_exits_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == exits.USAGE
    assert_one_line(err, "usage error")


def test_unreachable_libvirt_exits_1_naming_libvirt(tmp_path, capsys):
    code, out, err = run(
        capsys,
        "audit",
        "--config-file",
        good_conf(tmp_path),
        "--libvirt-uri",
        "qemu+tcp://127.0.0.1:1/system",
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "libvirt", "qemu+tcp://127.0.0.1:1/system")


def test_unreachable_nova_exits_1_naming_nova(tmp_path, capsys, world):
    code, out, err = run(
        capsys, "audit", "--config-file", good_conf(tmp_path), "--libvirt-uri", world
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "Nova", "127.0.0.1:1")


def test_a_cell_nova_cannot_reach_exits_1_naming_the_cell(tmp_path, capsys, world, monkeypatch):
    # docs/design.md rule 17: without the check every guest would be "unknown" (exit 3).
    nova = SimulatedNova()
    nova.add_compute("cmp-1")
    nova.down_cells.add("cell1")
    monkeypatch.setattr(audit_cli, "transport_from_conf", lambda conf: nova)
    code, out, err = run(
        capsys, "audit", "--config-file", good_conf(tmp_path), "--libvirt-uri", world
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "Nova could not reach a cell", "'cmp-1'", "UNKNOWN")


def test_the_console_script_reports_errors_the_same_way(tmp_path, world):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_orphans.cli",
            "audit",
            "--config-file",
            good_conf(tmp_path),
            "--libvirt-uri",
            "qemu+tcp://127.0.0.1:1/system",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == exits.ERROR
    assert_one_line(proc.stderr, "libvirt")


def test_a_missing_test_world_is_one_line_naming_the_file(tmp_path, capsys):
    missing = f"test://{tmp_path}/missing.xml"
    code, out, err = run(
        capsys, "audit", "--config-file", good_conf(tmp_path), "--libvirt-uri", missing
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "libvirt", "missing.xml")


# --- The agent and the journal commands. ------------------------------------------------


def conf_file(tmp_path: pathlib.Path, agent: str) -> str:
    path = tmp_path / "nova-orphans.conf"
    path.write_text(
        "[DEFAULT]\nhost = cmp-1\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\n{agent}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )
    return str(path)


AGENT_CASES = [
    ("an unknown action name", "action_deleted = obliterate", "obliterate"),
    ("a negative grace period", "grace_period = -5", "grace_period"),
    ("a fraction above one", "max_orphan_fraction = 2", "max_orphan_fraction"),
    ("zero sightings", "sightings_required = 0", "sightings_required"),
    ("an allow-listed UUID that is not one", "allow_uuids = nope", "not a UUID"),
    (
        "a quarantine directory that cannot be created",
        "quarantine_dir = /etc/hostname/q",
        "quarantine directory",
    ),
]


@pytest.mark.parametrize(("agent", "words"), [pytest.param(*c[1:], id=c[0]) for c in AGENT_CASES])
def test_bad_agent_config_exits_2_and_changes_nothing(tmp_path, capsys, world, agent, words):
    code = cli.main(
        ["run", "--once", "--config-file", conf_file(tmp_path, agent), "--libvirt-uri", world]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and words in err[0], err
    # Nothing was created: no journal, no quarantine.
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["restore", "not-a-uuid"],
        ["history", "--uuid", "1234"],
        ["purge"],
        ["purge", "--older-than", "-1"],
        ["purge", "--older-than", "soon"],
        ["quarantine"],
    ],
    ids=[
        "restore a non-UUID",
        "history of a non-UUID",
        "purge without age",
        "purge negative age",
        "purge garbage age",
        "quarantine without sub-command",
    ],
)
def test_bad_journal_commands_exit_2(capsys, argv):
    assert cli.main(argv) == exits.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nova-orphans: usage error")


def test_restore_of_a_uuid_not_in_quarantine_exits_2(tmp_path, capsys):
    (tmp_path / "state" / "quarantine").mkdir(parents=True)
    code = cli.main(
        [
            "restore",
            "--config-file",
            conf_file(tmp_path, ""),
            UNKNOWN_UUID,
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and "no restorable quarantine entry" in err[0]


def test_missing_nova_credentials_create_no_state(tmp_path, capsys, world):
    path = tmp_path / "nova-orphans.conf"
    path.write_text(f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 'state'}\n")
    code = cli.main(["run", "--once", "--config-file", str(path), "--libvirt-uri", world])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and "auth_type" in err[0]
    assert not (tmp_path / "state").exists()
