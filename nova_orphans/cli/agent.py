"""``run``: the periodic agent (or one cycle with ``--once``)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from oslo_config import cfg

from nova_orphans import agent as agent_loop
from nova_orphans import config, exits
from nova_orphans.act.effects import Effects
from nova_orphans.act.live import LiveEffects
from nova_orphans.act.quarantine.paths import write_durably
from nova_orphans.act.recording import RecordingEffects
from nova_orphans.cli import configure
from nova_orphans.cli.audit import services_from_conf, transport_from_conf
from nova_orphans.exceptions import one_line
from nova_orphans.metered import MeteredTransport
from nova_orphans.observe.libvirt_view import LibvirtView
from nova_orphans.observe.nova.observer import LOOKUPS_AT_ONCE, NovaObserver
from nova_orphans.record import files
from nova_orphans.record.journal import (
    Journal,
    refuse_if_held,
    refuse_unknown_schema,
    refuse_unwritable,
)
from nova_orphans.record.lock import LiveLock
from nova_orphans.record.metrics import Metrics
from nova_orphans.render import host as render_host
from nova_orphans.version import tool_version

LOG = logging.getLogger(__name__)


def run_agent(args: argparse.Namespace) -> int:
    """Wire the agent from the config, reconcile interrupted steps, then cycle."""
    conf = configure.load_conf(args, agent=True)
    # NOTE: oslo.config masks every secret option (password, token…) in this dump.
    conf.log_opt_values(LOG, logging.DEBUG)
    # NOTE: a second agent is named as such, not as the metrics port its twin holds.
    if not _dry_run(conf, args):
        LiveLock.refuse_if_held(conf.agent.live_lock_file)
    refuse_if_held(_journal_path(conf, args))
    # NOTE: before the live lock is taken: a journal this version cannot use changes nothing.
    refuse_unknown_schema(_journal_path(conf, args))
    refuse_unwritable(_journal_path(conf, args))
    metrics = Metrics()
    metrics.set_config(conf.agent.interval, conf.agent.grace_period)
    # NOTE: the port is bound first: one in use is a config error before anything is created.
    # A dry run asked for on the command line (an operator's check, maybe beside the live
    # agent) exports no metrics: the port and the textfile are the configured agent's.
    metrics_out = (lambda: None) if args.dry_run else _metrics(conf, metrics)
    # NOTE: likewise the report file is the configured agent's view, not a dry run's.
    report_out = _report_writer(None if args.dry_run else conf.agent.report_file, metrics)
    agent = build_agent(conf, args, metrics)
    LOG.info("%s", start_line(conf, agent, args.once))
    signals = Signals()
    code = exits.ERROR
    try:
        with signals.handled():
            code = _run(agent, conf, args, signals, metrics_out, report_out)
        return code
    except KeyboardInterrupt:
        code = exits.INTERRUPTED
        raise
    finally:
        agent.close()
        LOG.info("%s", stop_line(code, signals.received))


def start_line(conf: cfg.ConfigOpts, agent: agent_loop.Agent, once: bool) -> str:
    """What the agent starts as: version, config files read, host, and the actions in force."""
    actions = ", ".join(f"{k.value}={a.value}" for k, a in sorted(
        agent.policy.actions.items(), key=lambda item: item[0].value)) or "log only"  # fmt: skip
    mode = "one cycle" if once else f"every {conf.agent.interval} s"
    return (
        f"nova-orphans {tool_version()} starting ({mode}{', dry run' if agent.dry_run else ''}): "
        f"config files {', '.join(config.files_read(conf)) or 'none'}; host {agent.host}; "
        f"actions {actions}"
    )


def stop_line(code: int, received: signal.Signals | None) -> str:
    """Why and how the agent stopped."""
    why = f"on {received.name}" if received is not None else "after its cycle"
    return f"nova-orphans stopped {why}, exit {code}"


#: The signals that stop the agent between two steps (SIGQUIT as SIGTERM: no core dump).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
#: The signals the agent ignores on purpose, each with one log line: a stray ``kill -USR1``
#: or an alarm must not end it without its stop line.
IGNORED_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)


class Signals:
    """SIGTERM, SIGINT and SIGQUIT stop the agent between two steps; SIGHUP reloads its
    config; SIGUSR1, SIGUSR2 and SIGALRM are logged and ignored; SIGPIPE is ignored (a write
    to a reader gone away fails, and is said, instead). Each is documented in
    docs/admin/agent.md.

    NOTE: as oslo.service does: SIGTERM (systemd's stop) lets the step under way finish
    (the actuator checks between steps) and ends the cycle; SIGINT (Ctrl-C) likewise, and
    exits 130, and a second one abandons the cycle at once; SIGHUP reloads the mutable
    options (logging) and never stops the agent.
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        #: Set by any signal: the wait between two cycles ends at once.
        self.wake = threading.Event()
        self.reload = threading.Event()
        self.received: signal.Signals | None = None

    def _stop(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and self.received is signal.SIGINT:
            # NOTE: Ctrl-C twice: abandon the step under way now; its intent is journaled,
            # and the next start reconciles it (docs/design.md).
            raise KeyboardInterrupt
        self.received = signal.Signals(signum)
        self.stop.set()
        self.wake.set()
        LOG.info(
            "%s: stopping after the step under way%s",
            self.received.name,
            " (Ctrl-C again to abandon it now)" if signum == signal.SIGINT else "",
        )

    def _reload(self, _signum: int, _frame: object) -> None:
        self.reload.set()
        self.wake.set()

    @staticmethod
    def _ignore(signum: int, _frame: object) -> None:
        LOG.info(
            "%s ignored: SIGTERM stops the agent, SIGHUP reloads its config",
            signal.Signals(signum).name,
        )

    @contextlib.contextmanager
    def handled(self) -> Iterator[None]:
        """Install the handlers for the ``with`` block; the previous ones after it."""
        wanted: dict[signal.Signals, Any] = {
            **{signum: self._stop for signum in STOP_SIGNALS},
            signal.SIGHUP: self._reload,
            **{signum: self._ignore for signum in IGNORED_SIGNALS},
            signal.SIGPIPE: signal.SIG_IGN,
        }
        previous = {signum: signal.signal(signum, handler) for signum, handler in wanted.items()}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def exit_code(self, code: int) -> int:
        """``code``, or 130 when SIGINT stopped the agent (as a shell reports Ctrl-C)."""
        return exits.INTERRUPTED if self.received is signal.SIGINT else code


def _run(
    agent: agent_loop.Agent,
    conf: cfg.ConfigOpts,
    args: argparse.Namespace,
    signals: Signals,
    metrics_out: Callable[[], None],
    report_out: Callable[[agent_loop.CycleResult], None],
) -> int:
    agent.reconcile()
    if args.once:
        result = agent.cycle(should_stop=signals.stop.is_set)
        metrics_out()
        report_out(result)
        return signals.exit_code(result.exit_code)
    while not signals.stop.is_set():
        report_out(agent.cycle(should_stop=signals.stop.is_set))
        metrics_out()
        deadline = time.monotonic() + agent_loop.next_wait(conf.agent.interval, conf.agent.jitter)
        while not signals.stop.is_set() and signals.wake.wait(deadline - time.monotonic()):
            signals.wake.clear()
            if signals.reload.is_set():
                signals.reload.clear()
                reload_config(conf, args)
    return signals.exit_code(exits.OK)


def reload_config(conf: cfg.ConfigOpts, args: argparse.Namespace) -> None:
    """SIGHUP: check the config files as strictly as at start, then reload the mutable
    options (``debug``, ``default_log_levels``...); log what changed and what needs a restart.

    NOTE: an edited file that no longer loads keeps the agent on the settings it runs
    with (one error line), never stops it; no option that decides what the agent does
    changes under a running agent (oslo.config logs each such change as ignored).
    """
    files, dirs = configure.config_sources(args)
    try:
        config.load(files, dirs)
        changed = conf.mutate_config_files()
    except Exception as exc:  # NOTE: a reload never stops the agent
        failure = one_line(exc)
    else:
        failure = ""
    if failure:  # NOTE: logged outside the handler: oslo.log would append the exception
        LOG.error("SIGHUP: config not reloaded, the agent keeps its settings: %s", failure)
        return
    names = ", ".join(f"[{g or 'DEFAULT'}] {o}" for g, o in changed) or "no mutable option"
    LOG.info("SIGHUP: config files reloaded (%s): changed %s", ", ".join(files) or "none", names)


def _report_writer(path: str | None, metrics: Metrics) -> Callable[[agent_loop.CycleResult], None]:
    """Write each observed cycle's report to ``path`` (0600, replaced whole; for ``fleet
    audit --reports``); a failed cycle writes nothing, so the report ages into stale."""

    def write(result: agent_loop.CycleResult) -> None:
        if path and result.report is not None:
            text = render_host.render_json(result.report) + "\n"
            _output(
                metrics, "report", "[agent] report_file", path, lambda: write_durably(path, text)
            )

    return write


def _output(metrics: Metrics, file: str, option: str, path: str, write: Callable[[], None]) -> None:
    """``write()`` one of the agent's output files; a failure is one error line and counted
    (``nova_orphans_output_write_failures_total{file}``), and the agent carries on.

    NOTE: the report and the textfile are for the fleet view and the dashboards: a full disk,
    a read-only mount or a name that became a link must not stop the agent acting safely.
    """
    try:
        write()
    except OSError as exc:
        metrics.output_write_failed(file)
        LOG.error("%s %s not written: %s", option, path, files.cause(exc))


def build_agent(
    conf: cfg.ConfigOpts, args: argparse.Namespace, metrics: Metrics
) -> agent_loop.Agent:
    """Everything the agent needs, validated before anything runs."""
    settings = config.host_settings(
        conf, host=args.host, libvirt_uri=args.libvirt_uri, check_uri=True
    )
    policy = config.policy(conf)
    paths = config.state_paths(conf)
    dry_run = _dry_run(conf, args)
    transport = transport_from_conf(conf)
    nova = NovaObserver(MeteredTransport(transport, metrics), lookups_at_once=LOOKUPS_AT_ONCE)
    # Only now, with every setting validated, is anything created on disk.
    _require_writable_dir(paths.quarantine)
    # NOTE: the locks come before the journal is read or written: a second agent
    # exits having changed nothing. A dry run takes neither this host's live lock
    # nor the live journal's (docs/design.md rule 14).
    live_lock = None if dry_run else _live_lock(conf.agent.live_lock_file, paths.journal)
    try:
        journal = Journal(_journal_path(conf, args), exclusive=True)
    except BaseException:
        if live_lock is not None:
            live_lock.release()
        raise
    effects = build_effects(conf, settings, paths, dry_run)
    # NOTE: one connection for the agent's life, its view brought up to date each cycle.
    view = LibvirtView(settings.libvirt_uri, conf.agent.libvirt_full_look_every)
    return agent_loop.Agent(
        host=settings.host,
        open_hypervisor=view.session,
        libvirt_view=view,
        nova=nova,
        effects=effects,
        journal=journal,
        live_lock=live_lock,
        policy=policy,
        quarantine_root=paths.quarantine,
        instances_path=settings.instances_path,
        host_instances_path=settings.host_instances_path,
        compute_id_dirs=settings.compute_id_dirs,
        pinned_node=settings.pinned_node,
        deny=settings.deny,
        services=services_from_conf(conf, transport),
        dry_run=dry_run,
        live_journal_path=paths.journal if dry_run else None,
        stop_timeout=float(conf.agent.stop_timeout),
        metrics=metrics,
        retention=datetime.timedelta(days=conf.agent.quarantine_retention_days),
        full_look_every=conf.agent.full_look_every,
    )


def build_effects(
    conf: cfg.ConfigOpts, settings: config.HostSettings, paths: config.StatePaths, dry_run: bool
) -> Effects:
    """The live effects, or for a dry run the recording ones (which change nothing)."""
    if dry_run:
        return RecordingEffects(settings.libvirt_uri, settings.instances_path, paths.quarantine)
    return LiveEffects(
        settings.libvirt_uri,
        settings.instances_path,
        paths.quarantine,
        conf.agent.allow_shared_storage_reap,
    )


def _dry_run(conf: cfg.ConfigOpts, args: argparse.Namespace) -> bool:
    return bool(args.dry_run or conf.agent.dry_run)


def _journal_path(conf: cfg.ConfigOpts, args: argparse.Namespace) -> str:
    """The agent's journal; a dry run keeps its own (docs/design.md rule 14)."""
    paths = config.state_paths(conf)
    return paths.dry_run_journal if _dry_run(conf, args) else paths.journal


def _live_lock(path: str, journal: str) -> LiveLock:
    """Take this host's live lock for the agent of ``journal``; raises ``LiveAgentRunning``."""
    try:
        return LiveLock.take(path, journal)
    except OSError as exc:
        raise config.ConfigError(f"[agent] live_lock_file {path}: {exc.strerror or exc}") from exc


def _require_writable_dir(path: str) -> None:
    configure.require_no_file_above(path, "quarantine directory")  # NOTE: as check-config says
    try:
        files.private_dir(path)
    except OSError as exc:
        raise config.ConfigError(f"quarantine directory {path}: {files.cause(exc)}") from exc
    problem = files.unwritable(path)
    if problem is not None:
        raise config.ConfigError(f"quarantine directory {path} is not writable: {problem}")


def _metrics(conf: cfg.ConfigOpts, metrics: Metrics) -> Callable[[], None]:
    """Start the HTTP endpoint if configured; return what to call after each cycle."""
    if conf.metrics.port:
        address, port = conf.metrics.bind_address, conf.metrics.port
        try:
            metrics.serve(address, port)
        except OSError as exc:
            raise config.ConfigError(
                f"[metrics] port {port} on {address}: {exc.strerror or exc}"
            ) from exc
    textfile = conf.metrics.textfile
    if not textfile:
        return lambda: None
    return lambda: _output(
        metrics,
        "textfile",
        "[metrics] textfile",
        textfile,
        lambda: metrics.write_textfile(textfile),
    )
