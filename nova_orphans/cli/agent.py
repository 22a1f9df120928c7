"""``run``: the periodic agent (or one cycle with ``--once``)."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import signal
import threading
from collections.abc import Callable

from oslo_config import cfg

from nova_orphans import agent as agent_loop
from nova_orphans import config, exits
from nova_orphans.act.effects import Effects
from nova_orphans.act.live import LiveEffects
from nova_orphans.act.quarantine.paths import write_durably
from nova_orphans.act.recording import RecordingEffects
from nova_orphans.cli import configure
from nova_orphans.cli.audit import services_from_conf, transport_from_conf
from nova_orphans.observe.libvirt_view import LibvirtView
from nova_orphans.observe.nova.observer import LOOKUPS_AT_ONCE, NovaObserver
from nova_orphans.record.journal import Journal, refuse_if_held
from nova_orphans.record.lock import LiveLock
from nova_orphans.record.metrics import Metrics
from nova_orphans.render import host as render_host

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
    metrics = Metrics()
    # NOTE: the port is bound first: one in use is a config error before anything is created.
    # A dry run asked for on the command line (an operator's check, maybe beside the live
    # agent) exports no metrics: the port and the textfile are the configured agent's.
    metrics_out = (lambda: None) if args.dry_run else _metrics(conf, metrics)
    # NOTE: likewise the report file is the configured agent's view, not a dry run's.
    report_out = _report_writer(None if args.dry_run else conf.agent.report_file)
    agent = build_agent(conf, args, metrics)
    try:
        return _run(agent, conf, args.once, metrics_out, report_out)
    finally:
        agent.close()


def _run(
    agent: agent_loop.Agent,
    conf: cfg.ConfigOpts,
    once: bool,
    metrics_out: Callable[[], None],
    report_out: Callable[[agent_loop.CycleResult], None],
) -> int:
    agent.reconcile()
    if once:
        result = agent.cycle()
        metrics_out()
        report_out(result)
        return result.exit_code
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # NOTE: the current step finishes; the actuator checks between steps.
        signal.signal(signum, lambda *_: stop.set())
    while not stop.is_set():
        report_out(agent.cycle(should_stop=stop.is_set))
        metrics_out()
        stop.wait(agent_loop.next_wait(conf.agent.interval, conf.agent.jitter))
    return exits.OK


def _report_writer(path: str | None) -> Callable[[agent_loop.CycleResult], None]:
    """Write each observed cycle's report to ``path`` atomically (for ``fleet audit
    --reports``); a failed cycle writes nothing, so the report ages into stale."""

    def write(result: agent_loop.CycleResult) -> None:
        if path and result.report is not None:
            try:
                write_durably(path, render_host.render_json(result.report) + "\n")
            except OSError as exc:
                # NOTE: the report is for the fleet view; a full disk must not stop the agent.
                LOG.error("report_file %s not written: %s", path, exc.strerror or exc)

    return write


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
    nova = NovaObserver(
        agent_loop.MeteredTransport(transport, metrics), lookups_at_once=LOOKUPS_AT_ONCE
    )
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
    view = LibvirtView(settings.libvirt_uri, conf.agent.full_read_every)
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
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise config.ConfigError(f"quarantine directory {path}: {exc.strerror}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise config.ConfigError(f"quarantine directory {path} is not writable")


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
    return (lambda: metrics.write_textfile(textfile)) if textfile else (lambda: None)
