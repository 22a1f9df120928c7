"""``history``, ``quarantine list``, ``restore``, ``release`` and ``purge``: the journal and
the quarantine."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import sys
from typing import Any

from nova_orphans import audit, config, exits
from nova_orphans.act.actuator import Actuator, Steps
from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import entries as quarantine
from nova_orphans.act.quarantine import restore, retention
from nova_orphans.cli import common, configure
from nova_orphans.cli.audit import transport_from_conf
from nova_orphans.decide import gate
from nova_orphans.observe.errors import NovaError
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.record.entries import Intent, QuarantineEntry
from nova_orphans.record.journal import Journal
from nova_orphans.record.journal import present as journal_present
from nova_orphans.render import history, table
from nova_orphans.render import host as render_host

#: Seconds ``restore`` and ``purge`` wait for a purge or restore under way.
QUARANTINE_WAIT = 60.0


def _journal(
    args: argparse.Namespace, journal_required: bool = False, read_only: bool = False
) -> tuple[Journal, config.StatePaths, Any]:
    """The agent's journal; a mistyped state directory is not an empty one.

    ``history`` needs the journal itself; the quarantine commands also work from the
    quarantine's manifests when the journal is lost, so they need one of the two.
    ``read_only``: opened read-only, and a missing journal is an empty one in memory
    (docs/design.md: read-only commands never write, and work on read-only media).
    """
    conf = configure.load_conf(args)
    paths = config.state_paths(conf)
    # NOTE: a journal this user cannot read is named as such, never as no journal.
    found = journal_present(paths.journal) or (
        not journal_required and os.path.isdir(paths.quarantine)
    )
    if not found:
        where = paths.journal if journal_required else f"{paths.journal} nor {paths.quarantine}"
        raise config.ConfigError(
            f"no journal at {where} (check [agent] state_dir, journal_path, quarantine_dir; "
            "the agent creates them on its first run)"
        )
    if read_only:
        journal = Journal.read_only(paths.journal) or Journal.empty(paths.journal)
        return journal, paths, conf
    return Journal(paths.journal), paths, conf


def show_history(args: argparse.Namespace) -> int:
    """Print intents and outcomes (the dry runs', from their own journal, marked as such),
    and holds and releases, newest first (JSON: ``events`` in the versioned envelope)."""
    journal, paths, _ = _journal(args, journal_required=True, read_only=True)
    try:
        events = history.events(journal, args.uuid)
    finally:
        journal.close()
    if journal_present(paths.dry_run_journal):
        events += history.steps(_dry_run_history(paths.dry_run_journal, args.uuid, args.limit))
        events.sort(key=lambda e: e[0], reverse=True)
    del events[args.limit :]
    if args.format == "json":
        records = [record for _, record, _ in events]
        print(json.dumps(render_host.versioned({"events": records}), indent=2))
        return exits.OK
    rows = [(history.when(at, args.wide), *cells) for at, _, cells in events]
    columns = history.HISTORY_WIDE if args.wide else history.HISTORY
    for line in table.render(
        columns, [history.history_cells(r, args.wide) for r in rows], args.wide
    ):
        print(line)
    return exits.OK


def _dry_run_history(path: str, uuid: str | None, limit: int) -> list[Intent]:
    """The intents of the dry runs' own journal (they never share the live agent's)."""
    journal = Journal(path, read_only=True)
    try:
        return journal.history(uuid, limit)
    finally:
        journal.close()


def list_quarantine(args: argparse.Namespace) -> int:
    """Print every quarantine entry: whether it is restorable, and what it holds or lacks
    (JSON: ``entries`` in the versioned envelope)."""
    journal, paths, _ = _journal(args, read_only=True)
    try:
        listed = quarantine.listing(journal, paths.quarantine)
    finally:
        journal.close()
    if args.format == "json":
        rows = [
            {
                **dataclasses.asdict(item.entry),
                "restorable": item.restorable,
                "detail": item.detail,
                "known_from": item.known_from,
            }
            for item in listed
        ]
        print(json.dumps(render_host.versioned({"entries": rows}), indent=2))
        return exits.OK
    columns = history.QUARANTINE_WIDE if args.wide else history.QUARANTINE
    found: list[tuple[str, ...]] = []
    for item in listed:
        e = item.entry
        when, restorable = (
            history.when(e.reaped_time, args.wide),
            "yes" if item.restorable else "NO",
        )
        found.append(
            (when, e.uuid, e.kind, restorable, item.detail, e.path)
            if args.wide
            else (when, e.uuid, restorable, item.detail)
        )
    for line in table.render(columns, found, args.wide):
        print(line)
    return exits.OK


def restore_guest(args: argparse.Namespace) -> int:
    """Ask Nova, then redefine a reaped guest from its saved XML, move its files back and
    put it on hold (docs/design.md rules 12 and 13).

    Exit 1 with ``refused: …`` when Nova runs the server and ``--start`` was asked, or
    when Nova cannot be asked; ``--force`` overrides. Nothing is changed on a refusal.
    """
    journal, paths, conf = _journal(args)
    settings = config.host_settings(
        conf, host=args.host, libvirt_uri=args.libvirt_uri, check_uri=True
    )
    # NOTE: bad input, or an entry not to be trusted, changes nothing, not even a lock.
    _restorable_entry(journal, paths, args.uuid, settings.instances_path)
    # NOTE: held from reading the entry to the end: a running agent's retention
    # purge must not delete the directory while its files move back.
    with journal.quarantine_held(QUARANTINE_WAIT):
        return _restore(args, journal, paths, conf, settings)


def _restorable_entry(
    journal: Journal, paths: config.StatePaths, uuid: str, instances_path: str
) -> QuarantineEntry:
    """The entry ``restore`` brings back; refused (one line) when it is not to be trusted."""
    entry = quarantine.latest(journal, paths.quarantine, uuid)
    if entry is None:
        raise common.UsageError(
            f"no restorable quarantine entry for {uuid} (see 'nova-orphans quarantine list')"
        )
    tampered = quarantine.tampering(entry, paths.quarantine, instances_path)
    if tampered:  # NOTE: docs/design.md rule 7
        raise EffectError(f"restore {uuid}: {tampered}; nothing changed")
    return entry


def _restore(
    args: argparse.Namespace,
    journal: Journal,
    paths: config.StatePaths,
    conf: Any,
    settings: config.HostSettings,
) -> int:
    # Again: a purge may have just run.
    entry = _restorable_entry(journal, paths, args.uuid, settings.instances_path)
    nova = NovaObserver(transport_from_conf(conf))

    def define(entry: QuarantineEntry, start: bool) -> str:
        return restore.bring_back(
            entry, settings.libvirt_uri, settings.instances_path, paths.quarantine, start
        )

    try:
        restored = restore.guarded_restore(
            entry,
            nova=nova,
            host=settings.host,
            journal=journal,
            define=define,
            now=common.now(),
            steps=Steps(
                journal, common.now, _restore_verdict(nova, settings), failure_level=logging.INFO
            ),
            start=args.start,
            force=args.force,
            saved_state=quarantine.has_managed_save(entry),
        )
    except restore.RestoreRefused as exc:
        return common.fail(exits.ERROR, f"refused: {exc}")
    if restored.warning:
        common.warn(restored.warning)
    common.say(
        f"restored {entry.uuid}: {restored.detail}; on hold: the agent leaves it alone until "
        f"`nova-orphans release {entry.uuid}`"
    )
    return exits.OK


def _restore_verdict(nova: NovaObserver, settings: config.HostSettings) -> gate.SafetyVerdict:
    """``restore``'s gate (docs/design.md rule 19): this libvirt proven to be Nova's node of
    the host first (rule 10); a mismatch is one line and exit 1 (``IdentityMismatch``).

    NOTE: a Nova that cannot be asked cannot prove or refute anything: the restore then
    asks it again (rule 13) and is refused, unless the operator's ``--force`` says to
    restore without Nova, as before. A Nova that answers as another cloud's is refused
    whatever the flags.
    """
    with LibvirtObserver.open(settings.libvirt_uri) as hypervisor:
        try:
            identity = audit.check_identity(
                hypervisor, nova, settings.host, settings.compute_id_dirs, settings.pinned_node
            )
        except NovaError:
            return gate.operator_command("restore")
    return gate.operator_restore(identity)


def release_guest(args: argparse.Namespace) -> int:
    """Release a guest's hold: the agent treats it as a fresh finding again."""
    path = config.state_paths(configure.load_conf(args)).journal
    released = None
    if journal_present(path):  # NOTE: no journal, no hold: none is created
        journal = Journal(path)
        try:
            released = journal.release(args.uuid, common.now())
        finally:
            journal.close()
    if released is None:
        raise common.UsageError(f"{args.uuid} is not on hold; nothing released")
    common.say(
        f"released {args.uuid} (on hold since {released.since.isoformat()}: "
        f"{released.reason}); the agent will see it afresh"
    )
    return exits.OK


def purge_quarantine(args: argparse.Namespace) -> int:
    """Delete quarantine entries older than ``--older-than`` days (``--dry-run``: only say so).

    From a terminal, the entries are listed and the purge asks for confirmation
    first (``--yes`` does not ask). A quarantine directory that neither the
    journal nor a readable manifest describes stops the purge before anything
    is deleted.
    """
    journal, paths, conf = _journal(args)
    unknown = quarantine.unknown_directories(journal, paths.quarantine)
    if unknown:
        raise EffectError(f"{unknown[0].problem}; nothing purged (repair or remove it by hand)")
    now, older_than = common.now(), datetime.timedelta(days=args.older_than)
    due = retention.expired(journal, paths.quarantine, now, older_than)
    for entry in due:  # NOTE: docs/design.md rule 7: all checked before any is deleted
        tampered = quarantine.tampering(entry, paths.quarantine)
        if tampered:
            raise EffectError(f"purge: {tampered}; nothing purged (repair or remove it by hand)")
    if not due:
        print(f"nothing reaped {args.older_than:g} days ago or more: nothing to purge")
        return exits.OK
    if not (args.dry_run or args.yes) and sys.stdin.isatty() and not _confirmed(due):
        print("nothing purged")
        return exits.OK
    # NOTE: imported here: the agent's module (the daemon, its metrics) is loaded only by
    # a purge, not by every journal command (start-up time of the CLI).
    from nova_orphans.cli.agent import build_effects

    effects = build_effects(conf, config.host_settings(conf), paths, args.dry_run)
    actuator = Actuator(
        effects,
        None,  # NOTE: a purge re-verifies no guest: it acts on the quarantine only
        journal,
        common.now,
        dry_run=args.dry_run,
        verdict=gate.operator_command("purge"),
        failure_level=logging.INFO,  # NOTE: the command prints each failure itself
    )
    try:
        purged = retention.purge_expired(
            actuator, journal, paths.quarantine, now, older_than, wait=QUARANTINE_WAIT
        )
    finally:
        effects.close()
    for p in purged:
        common.say(_purged_line(p))
    return exits.OK if all(p.outcome == "done" for p in purged) else exits.ERROR


def _confirmed(due: list[QuarantineEntry]) -> bool:
    """List what would be purged and ask the operator at the terminal; True for yes.

    NOTE: the purge is the one irreversible step; a script (no terminal) is not asked.
    """
    for entry in due:
        common.say(f"would purge {entry.uuid} (reaped {entry.reaped_at}): {entry.path}")
    entries = f"{len(due)} entries" if len(due) > 1 else "this entry"
    common.say(f"purge {entries} for good? [y/N] ", sys.stderr, end="")
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _purged_line(p: retention.Purged) -> str:
    """One purged entry for the operator: what happened, to which entry, and the detail."""
    what = f"{p.entry.uuid} (reaped {p.entry.reaped_at})"
    if p.outcome == "failed":
        return f"FAILED to purge {what}: {p.detail}"
    if p.outcome == "refused":
        return f"REFUSED to purge {what}: {p.detail}"
    if p.dry_run:
        return f"would purge {what}: {p.detail}"
    return f"purged {what}: {p.detail}"
