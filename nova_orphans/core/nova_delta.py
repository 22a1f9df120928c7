"""Bring the last view of Nova up to date from what changed since. Pure.

The agent keeps its last ``NovaView`` of the host, the domains it was compared with, and
the time (Nova's clock) from which a change may be missing from it. Nova then lists what
changed since that time (``changes-since``: changed and deleted rows), and this module
works out the new view — or why only a full look can be trusted.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from nova_orphans.core.model import NovaView, Server, managed_here

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


@dataclasses.dataclass(frozen=True)
class Update:
    """The view brought up to date, but for the records still to be looked up."""

    servers_here: dict[str, Server]
    #: UUIDs to look up: every domain of a server Nova does not manage here, and the
    #: servers Nova manages here whose full record is wanted (no domain, or deny-listed).
    to_look_up: tuple[str, ...]


def bring_up_to_date(
    base: Baseline,
    domains: frozenset[str],
    changed: Iterable[str],
    changed_here: Mapping[str, Server],
    details_for: Iterable[str] = (),
) -> Update | str:
    """The view after the changes, or a sentence saying why a full look is needed.

    ``changed``: every server (of any host) Nova changed or deleted since
    ``base.since``; ``changed_here``: the full records of those Nova places on the
    host. NOTE: a server Nova manages here whose row did not change is still
    managed here (Nova bumps a row's ``updated_at`` with every change of its host,
    states or deletion), so only the servers Nova manages here are carried over —
    but for a domain of such a server that vanished: nothing in Nova explains
    it, and only a full look is trusted then. Every other domain is looked up
    afresh, as in a full look: an actionable finding never rests on an earlier
    cycle's answer (its sightings must be independent looks, docs/design.md rule 4),
    and an archived row changes nothing ``changes-since`` could show.
    """
    host = base.view.host
    changed = set(changed) | changed_here.keys()
    here = {u: s for u, s in base.view.servers_here.items() if u not in changed}
    here.update({u: s for u, s in changed_here.items() if managed_here(s, host)})
    vanished = sorted((base.domains - domains) & here.keys())
    if vanished:
        return (
            f"the domain of {len(vanished)} server(s) Nova places here unchanged is gone "
            f"(e.g. {vanished[0]})"
        )
    wanted = (here.keys() - domains) | (set(details_for) & here.keys())
    to_look_up = {u for u in wanted if here[u].summary} | (domains - here.keys())
    return Update(here, tuple(sorted(to_look_up)))
