"""The ``nova-orphans fleet audit`` sub-command.

Exit codes as for ``audit``: 0 nothing found, 3 orphans found (split-brain
included), 1 Nova failed or any host was unreachable (with ``--reports``: any
report stale, unreliable, unreadable or missing), 2 usage or configuration
error (with ``--reports``: no report in the directory or on stdin).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from oslo_config import cfg

from nova_orphans import config, exits
from nova_orphans.cli import common, configure
from nova_orphans.cli import fleet_output as output
from nova_orphans.cli.audit import transport_from_conf
from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH
from nova_orphans.fleet import reports
from nova_orphans.fleet.audit import fleet_audit
from nova_orphans.fleet.from_reports import merge_reports
from nova_orphans.fleet.hostname import BadURITemplate, check_uri_template
from nova_orphans.fleet.records import MergedFleet
from nova_orphans.fleet.scan import (
    OnProgress,
    Progress,
    Scanner,
    libvirt_scan,
    scan_hosts,
    uri_for,
)
from nova_orphans.model import Selector
from nova_orphans.observe.errors import NovaBadAnswer
from nova_orphans.observe.nova.api import Transport
from nova_orphans.observe.nova.fleet import FleetNovaObserver
from nova_orphans.render import fleet as render
from nova_orphans.render import table


@dataclasses.dataclass(frozen=True)
class FleetSettings:
    """What to audit and how, resolved from the command line and ``[fleet]``."""

    hosts: tuple[str, ...] | None
    uri_template: str
    concurrency: int
    timeout: float
    deny: Selector = dataclasses.field(default_factory=Selector)
    instances_path: str = DEFAULT_INSTANCES_PATH


def handle_audit(args: argparse.Namespace) -> int:
    """Run ``fleet audit`` as the command line asked; returns the exit code."""
    conf = configure.load_conf(args)
    # NOTE: the output files are checked before any work, for both ways of auditing.
    output.check_output_file(args.json_file, "--json-file")
    output.check_output_file(args.metrics_textfile, "--metrics-textfile")
    if args.reports is not None:
        return handle_reports(conf, args)
    if args.max_age is not None:
        raise common.UsageError("--max-age applies only with --reports")
    settings = settings_from(conf, args)
    transport = transport_from_conf(conf)
    with progress_line(sys.stderr) as progress:
        result = run_audit(settings, transport, common.now(), progress=progress)
    return finish(result, args)


def finish(fleet: MergedFleet, args: argparse.Namespace) -> int:
    """Print the fleet (``--format``), write ``--json-file`` and ``--metrics-textfile``;
    returns the exit code, with one stderr line naming what could not be merged (or
    written) when that is why it is 1."""
    document = render.render_json(fleet)
    print(document if args.format == "json" else render.render_table(fleet, args.wide))
    written = output.write_outputs(fleet, document, args.json_file, args.metrics_textfile)
    code = exit_code(fleet)
    if code == exits.ERROR:
        return common.fail(code, render.problems(fleet))
    return exits.ERROR if written != exits.OK else code


def settings_from(conf: cfg.ConfigOpts, args: argparse.Namespace) -> FleetSettings:
    """Command-line values win over ``[fleet]``; raises ``ConfigError`` on a bad template."""
    template = args.uri_template or conf.fleet.uri_template
    if args.uri_template is None:
        try:
            check_uri_template(template)
        except BadURITemplate as exc:
            raise config.ConfigError(f"[fleet] uri_template = {exc}") from None
    config.check_libvirt_uri(uri_for(template, "host"))
    # NOTE: host_settings resolves the local host's settings; of those only the
    # deny list and instances_path apply to every host of the fleet.
    local = config.host_settings(conf)
    return FleetSettings(
        hosts=args.hosts,
        uri_template=template,
        concurrency=args.concurrency or conf.fleet.concurrency,
        timeout=args.timeout or conf.fleet.timeout,
        deny=local.deny,
        instances_path=local.instances_path,
    )


def run_audit(
    settings: FleetSettings,
    transport: Transport,
    now: datetime.datetime,
    scanner: Scanner = libvirt_scan,
    retry: Callable[[Callable[[], object]], object] | None = None,
    progress: OnProgress | None = None,
) -> MergedFleet:
    """Audit the fleet; raises ``NovaError`` when Nova fails (nothing is concluded then).

    ``progress`` is told how far the hosts' scan is (see ``scan_hosts``)."""
    nova = FleetNovaObserver(transport, retry=retry)
    known = nova.compute_hosts()
    hosts = settings.hosts or known
    if not hosts:
        raise NovaBadAnswer(request="the service listing", reason="no nova-compute host listed")
    scans = scan_hosts(
        hosts,
        settings.uri_template,
        concurrency=settings.concurrency,
        timeout=settings.timeout,
        scanner=scanner,
        progress=progress,
        on_scanned=lambda scan: nova.list_host_soon(scan.host) if scan.reachable else None,
    )
    return fleet_audit(scans, nova, known, now, settings.deny, settings.instances_path)


#: A host scanned this long is named in the progress line as one being waited on.
SLOW_HOST_SECONDS = 3.0
#: Hosts named at most in the progress line.
SLOW_HOSTS_NAMED = 3


@contextlib.contextmanager
def progress_line(stream: TextIO) -> Iterator[OnProgress | None]:
    """A progress line redrawn in place on ``stream`` while the hosts are scanned, and
    wiped at the end; None (no progress at all) when ``stream`` is not a terminal.

    NOTE: a script or a log file reading stderr gets only the error lines, never a
    progress line.
    """
    if not stream.isatty() or os.environ.get("TERM", "") in ("", "dumb"):
        # NOTE: a terminal that cannot move the cursor shows every redraw as text.
        yield None
        return

    def show(progress: Progress) -> None:
        stream.write("\r" + table.cut(progress_text(progress), _columns(stream) - 1) + "\x1b[K")
        stream.flush()

    try:
        yield show
    finally:
        stream.write("\r\x1b[K")
        stream.flush()


def progress_text(progress: Progress) -> str:
    """One line: hosts scanned of all, unreachable ones, and the hosts being waited on."""
    text = f"fleet audit: {progress.done}/{progress.total} hosts scanned"
    if progress.unreachable:
        text += f", {progress.unreachable} unreachable"
    slow = [(h, s) for h, s in progress.scanning if s >= SLOW_HOST_SECONDS]
    if slow:
        named = ", ".join(f"{h} ({s:.0f} s)" for h, s in slow[:SLOW_HOSTS_NAMED])
        more = f" and {len(slow) - SLOW_HOSTS_NAMED} more" if len(slow) > SLOW_HOSTS_NAMED else ""
        text += f"; waiting on {named}{more}"
    return text


def _columns(stream: TextIO) -> int:
    """The terminal's width; ``table.WIDTH`` when it does not say (0 columns, or no size)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or table.width()
    except (OSError, ValueError):
        return table.width()


def exit_code(result: MergedFleet) -> int:
    """1 when a host was not audited or a report not merged (unreachable, stale, unreliable,
    unreadable, missing), else 3 when anything needs the operator, else 0."""
    if result.incomplete or result.unattributed:
        return exits.ERROR
    return exits.FOUND if result.has_orphans else exits.OK


def handle_reports(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    """``fleet audit --reports DIR|-``: merge the hosts' reports; returns the exit code."""
    scan_only = [f"--{n}" for n in ("hosts", "uri_template", "concurrency", "timeout")
                 if getattr(args, n) is not None]  # fmt: skip
    if scan_only:
        names = ", ".join(o.replace("_", "-") for o in scan_only)
        raise common.UsageError(f"{names}: not with --reports (no host is scanned)")
    try:
        parsed = reports.read_stream(sys.stdin) if args.reports == "-" else (
            reports.read_directory(args.reports))  # fmt: skip
    except reports.NoReports as exc:
        return common.fail(exits.USAGE, str(exc))
    except OSError as exc:
        return common.fail(exits.USAGE, f"--reports {args.reports}: {exc.strerror or exc}")
    max_age = datetime.timedelta(seconds=args.max_age or conf.fleet.report_max_age)
    nova = FleetNovaObserver(transport_from_conf(conf))
    return finish(merge_reports(parsed, nova, common.now(), max_age), args)
