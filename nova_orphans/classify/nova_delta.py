"""Bring the last view of Nova up to date from what changed since. Pure.

The agent keeps its last ``NovaView`` of the host, the domains it was compared with, and
the time (Nova's clock) from which a change may be missing from it. Nova then answers what
concerns this host only: its plain listing (a server missing from it left, or was deleted),
the changes of its servers since that time (``changes-since``: changed and deleted rows),
and, for each record kept of a domain Nova does not manage here (``to_watch``), whether its
server changed.
This module works out the new view from those answers — or why only a full look can be
trusted. Nothing asked depends on the rest of the cloud.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from nova_orphans.model import Migration, NovaView, Server, managed_here

#: The agent's default cadence of full looks at Nova: one in this many cycles (an hour at
#: the default interval); the cycles between bring the last view up to date.
FULL_LOOK_EVERY = 6


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The last view of the host, and from when a change may be missing from it."""

    view: NovaView
    #: The UUIDs of the domains the view was taken for.
    domains: frozenset[str]
    #: Nova's clock, less a margin, before the view's first request: every change at or
    #: after this time must be asked for.
    since: datetime.datetime
    #: Views brought up to date from changes since the last full look.
    incremental: int = 0
    #: The records of the domains not managed here in the view before ``view``.
    earlier: Mapping[str, Server | None] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Update:
    """The view brought up to date, but for the records still to be looked up."""

    servers_here: dict[str, Server]
    #: UUIDs to look up: every new domain, every domain whose server changed and Nova
    #: does not manage here, and the servers Nova manages here whose full record is
    #: wanted (no domain, or deny-listed).
    to_look_up: tuple[str, ...]
    #: The last view's record (None: no record) of each domain still there whose
    #: server Nova did not manage here and did not change since, when the view before
    #: gave the same record: still true.
    kept: dict[str, Server | None] = dataclasses.field(default_factory=dict)
    #: The last view's migrations when nothing they explain changed; None: ask Nova.
    migrations: tuple[Migration, ...] | None = None
    #: The record of each domain whose server changed on this host and that Nova does
    #: not manage here (deleted, SOFT_DELETED, in a state not managed): the change
    #: listing's own record, the one its lookup would give.
    from_changes: dict[str, Server] = dataclasses.field(default_factory=dict)


def to_watch(base: Baseline, domains: frozenset[str]) -> frozenset[str]:
    """The domains whose record the last view may keep, once their server shows no change.

    NOTE: every one of them: a record of a server on another host changes where nothing
    asked about this host shows it, and one on this host can leave it between two looks
    unseen (a SOFT_DELETED server restored and evacuated, a deleted row brought back by a
    restored database and moved): neither the host's listing nor its changes name it then.
    """
    return frozenset(
        u
        for u, record in base.view.lookups.items()
        if u in domains and u in base.earlier and base.earlier[u] == record
    )


def bring_up_to_date(
    base: Baseline,
    domains: frozenset[str],
    listed: Iterable[str],
    changed_here: Mapping[str, Server],
    changed_elsewhere: Iterable[str] = (),
    details_for: Iterable[str] = (),
) -> Update | str:
    """The view after the changes, or a sentence saying why a full look is needed.

    ``listed``: the UUIDs of the host's plain listing now (the servers Nova manages
    here); ``changed_here``: the full records of the servers on the host Nova changed
    or deleted since ``base.since``; ``changed_elsewhere``: those of ``to_watch`` whose
    server changed since. A server of the last view missing from the listing and from
    the changes left the host (moved, shelved, or deleted and archived): it is changed.
    A server listed that was neither in the last view nor among the changes arrived
    without a change Nova shows: the clocks are in doubt, only a full look is trusted.
    NOTE: a server row that did not change still says what it said (Nova bumps
    a row's ``updated_at`` with every change of its host, states or deletion, and a
    server created since is a change), so the last view's answers about unchanged
    servers are carried over: the servers Nova manages here — but for a domain of such
    a server that vanished: nothing in Nova explains it, and only a full look is
    trusted then — and the record (or "no record") of each domain Nova does not
    manage here, once two looks in a row gave it. What ``changes-since`` cannot show
    is an archived row (archival moves rows, changing no ``updated_at``): a server
    here deleted and archived since is missing from the listing (looked up), but a
    kept deleted record may have been archived since, until the next full look;
    re-verification before any step asks afresh (docs/design.md rule 5). A domain
    that was not in the last view is looked up.
    """
    host = base.view.host
    listed = frozenset(listed)
    unseen = sorted(listed - base.view.servers_here.keys() - changed_here.keys())
    if unseen:
        return (
            f"{len(unseen)} server(s) Nova now places here show no change since "
            f"{base.since.isoformat()} (e.g. {unseen[0]})"
        )
    departed = base.view.servers_here.keys() - listed - changed_here.keys()
    changed = departed | set(changed_elsewhere) | changed_here.keys()
    here = {u: s for u, s in base.view.servers_here.items() if u not in changed}
    here.update({u: s for u, s in changed_here.items() if managed_here(s, host)})
    vanished = sorted((base.domains - domains) & here.keys())
    if vanished:
        return (
            f"the domain of {len(vanished)} server(s) Nova places here unchanged is gone "
            f"(e.g. {vanished[0]})"
        )
    # NOTE: only a record two looks in a row agreed on: one wrong answer (an empty
    # page is well-formed: "no record") is not carried from cycle to cycle.
    kept = {
        u: record
        for u, record in base.view.lookups.items()
        if u in domains and u not in changed and u not in here
        and u in base.earlier and base.earlier[u] == record
    }  # fmt: skip
    # NOTE: the host's change listing and a lookup ask the same detail view of the same
    # row (``/servers/detail``, ``changes-since``, deleted rows included): a domain whose
    # server changed on this host, not managed here, needs no lookup of its own. A
    # deleted row nova-compute's clean-up saves again (``cleaned``) costs nothing more.
    from_changes = {u: changed_here[u] for u in domains & changed_here.keys() if u not in here}
    wanted = (here.keys() - domains) | (set(details_for) & here.keys())
    to_look_up = {u for u in wanted if here[u].summary} | (
        domains - here.keys() - kept.keys() - from_changes.keys()
    )
    return Update(
        here,
        tuple(sorted(to_look_up)),
        kept,
        _kept_migrations(base, here, domains, changed, to_look_up | from_changes.keys()),
        from_changes,
    )


def _kept_migrations(
    base: Baseline,
    here: Mapping[str, Server],
    domains: frozenset[str],
    changed: set[str],
    to_look_up: set[str],
) -> tuple[Migration, ...] | None:
    """The last view's migrations, when still all a finding needs; None: ask Nova.

    NOTE: the migrations explain only the domains Nova does not manage here and the
    servers here without a domain (lost). When none of those is looked up and every
    lost server was lost in the last view, unchanged, the migrations that explain them
    are the last view's: a migration starts and ends with a change of its server's
    row (task_state, host, vm_state). Nova may close a migration without touching the
    server (an evacuation's source clean-up: done -> completed), which changes no
    finding's kind; re-verification reads the server's migrations afresh (rule 5).
    """
    lost = here.keys() - domains
    was_lost = base.view.servers_here.keys() - base.domains
    if to_look_up or (lost & changed) or not lost <= was_lost:
        return None
    return base.view.migrations
