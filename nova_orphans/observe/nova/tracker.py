"""The agent's view of Nova, kept from cycle to cycle and brought up to date from changes.

A full look (``NovaObserver.look``) costs Nova in proportion to the host's servers and
its orphans. The agent keeps its last view and, in the cycles between full looks, asks only
about this host: its plain listing (a server of the last view missing from it left), the
changes of its servers since the last look (``changes-since`` returns changed and deleted
rows), ``GET /servers/{id}`` of each kept record of a server elsewhere or of none, and
a lookup for each new domain and each domain of a server that left or changed; the last
view's record of every other domain still holds (``classify/nova_delta.py``). Nothing it asks
grows with the other hosts, their servers or their changes. docs/design.md §8 ("Incremental
agent cycles") gives the requests and why each holds.

Since when is Nova's own clock: the HTTP ``Date`` of the first answer of the last look or
the newest report time of a compute service in it (a steady cycle, which lists no services:
its ``Date`` less the API node's lead last measured), whichever is earlier, less
``SAFETY_MARGIN`` (Nova's services stamp ``updated_at`` with their own clocks, and a change
is committed a moment after it is stamped). NOTE: the ``Date`` is the clock of one API node,
the ``updated_at`` a row gets is its writer's (mostly the conductors', the same that stamp
the services' reports): an API node whose clock runs ahead of them by more than the margin
would date the changes-since past changes still to be listed. So the look's ``Date`` must
agree with the newest report within the margin, either way, or the next look is full (a
warning says by how much; ``clock_ahead`` is published as a metric). A full look comes
every ``full_every`` cycles and whenever anything is in doubt: no earlier view (start, or
the last cycle failed), no ``Date`` from Nova, no report time, Nova's clock gone back or
off its reports, a server listed here that shows no change, a domain of a server Nova
places here, unchanged, gone, or the caller saying so (``invalidate``).

Nova's clocks are read (a service listing's newest report beside the look's ``Date``) at
start and while in doubt only: after a look that failed, while they disagree, after Nova's
clock went back or a listing came without a report time. NOTE: not periodically: Nova
answers ``os-services?host=H`` from every compute service of every cell (services.py
filters after ``service_get_all(..., all_cells=True)``; 9 s of Nova time at 10,000
computes), and no per-host answer carries a writer's time instead (a hypervisor's
``service`` names its host, id and disabled reason, no ``updated_at``; its uptime is an RPC
to the compute). A lead that changes while the clocks agree (a clock stepped forward
between readings) is not seen until a reading; it can only hide a change of a server that
stays on the host until the next full look (every ``full_every`` cycles, which re-bases
the view whatever the clocks say), and re-verification before a step is a full look
(docs/design.md §8).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Sequence

from nova_orphans.classify.nova_delta import (
    FULL_LOOK_EVERY,
    Baseline,
    Update,
    bring_up_to_date,
    to_watch,
)
from nova_orphans.model import NovaView, Server
from nova_orphans.observe.errors import NovaBadAnswer
from nova_orphans.observe.nova.api import parse_server
from nova_orphans.observe.nova.observer import NovaObserver

LOG = logging.getLogger(__name__)

SAFETY_MARGIN = datetime.timedelta(minutes=5)


class NovaTracker:
    """``look`` as ``NovaObserver.look``, from the changes since the last view."""

    def __init__(self, nova: NovaObserver, full_every: int = FULL_LOOK_EVERY) -> None:
        self._nova = nova
        self._full_every = full_every
        self._baseline: Baseline | None = None
        self._doubt: str | None = "no earlier view"
        self._last_start: datetime.datetime | None = None
        #: How far Nova's ``Date`` ran ahead of its newest service report, last measured.
        self._ahead: datetime.timedelta | None = None
        #: Whether the next full look must read a report time (at start and in doubt).
        self._clock_due = True
        #: Whether the last view was a full look (for the logs and the tests).
        self.last_was_full = True
        #: The domains whose record the last view kept from an earlier one (for the tests).
        self.kept: frozenset[str] = frozenset()
        #: Seconds Nova's ``Date`` ran ahead of its newest service report in the last look
        #: (negative: behind); None when either was missing.
        self.clock_ahead: float | None = None

    def invalidate(self, why: str) -> None:
        """Make the next observation a full look."""
        self._baseline, self._doubt = None, why

    def look(
        self, host: str, domain_uuids: Sequence[str], details_for: Sequence[str] = ()
    ) -> NovaView:
        """Nova's view of ``host``: from the changes when the last view can be trusted."""
        domains = frozenset(domain_uuids)
        base, why = self._baseline, self._doubt or _why_full(self._baseline, host, self._full_every)
        clock_due = self._clock_due
        # NOTE: until this look succeeds there is no view to build on, and the clocks are
        # in doubt: a look that failed reads them again.
        self.invalidate("the last look at Nova failed")
        self._clock_due = True
        self.kept = frozenset()
        self._nova.restart_clock()
        view: NovaView | None = None
        if why is None and base is not None:
            outcome = self._incremental(base, domains, details_for)
            if isinstance(outcome, str):
                why = outcome
            else:
                view = outcome
        if view is None:
            LOG.info("a full look at Nova: %s", why)
            self._nova.restart_clock()
            view = self._nova.look(host, domain_uuids, details_for, cells_from_listing=True)
            if clock_due and self._nova.newest_report_at is None:
                self._nova.require_cells_answer(host)
        full = why is not None
        self._keep(view, domains, base, full=full, clock_read=clock_due and full)
        self.last_was_full = why is not None
        return view

    def _incremental(
        self, base: Baseline, domains: frozenset[str], details_for: Iterable[str]
    ) -> NovaView | str:
        """The view from what concerns this host only (docs/design.md §8).

        NOTE: the host's plain listing shows what left (a server of the last view
        missing from it), its change listing what changed on it, and ``GET
        /servers/{id}`` of each record kept of a server elsewhere (or of none) whether
        that one changed: none of them grows with the rest of the cloud.
        """
        host = base.view.host
        listed = self._nova.summaries_on_host(host)
        changed_here = self._changed_on_host(host, base.since)
        watched = sorted(to_watch(base, domains))
        shown = zip(watched, self._nova.show_all(watched), strict=True)
        elsewhere = {u for u, now in shown if _changed(base.view.lookups[u], now)}
        update = bring_up_to_date(base, domains, listed, changed_here, elsewhere, details_for)
        if isinstance(update, str):
            return update
        self.kept = frozenset(update.kept)
        return self._finish(host, update, domains, listed=bool(listed))

    def _finish(self, host: str, update: Update, domains: frozenset[str], listed: bool) -> NovaView:
        servers_here = dict(update.servers_here)
        looked_up = self._nova.look_up_domains(host, update.to_look_up, servers_here, domains)
        lookups = {**update.kept, **update.from_changes, **looked_up}
        # NOTE: Nova skips a cell it cannot reach in any filtered listing (docs/design.md
        # rule 17). The host's servers all live in its cell: a listing that names any came
        # from it, answering; an empty one is checked against the service listing. A
        # fresh "no record" needs every cell, as in a full look (``finish``); a kept one
        # was given with every cell answering, and its UUID asked about since.
        return self._nova.finish(
            host, servers_here, lookups, domains,
            migrations=update.migrations, host_cell_answered=listed, kept=self.kept,
        )  # fmt: skip

    def _changed_on_host(self, host: str, since: datetime.datetime) -> dict[str, Server]:
        """Full records of the servers on ``host`` changed since ``since`` (deleted too).

        NOTE: each record must name ``host``: then the answer is what the host
        filter gives, whether or not Nova applied it.
        """
        records: dict[str, Server] = {}
        for item in self._nova.changes_on_host(host, since):
            server = parse_server(item)
            if server.host != host:
                raise NovaBadAnswer(
                    request="the host's changes",
                    reason=f"server {server.uuid} is on {server.host!r}, not {host!r} "
                    "(do the credentials have the admin role?)",
                )
            records[server.uuid] = server
        return records

    def _keep(
        self,
        view: NovaView,
        domains: frozenset[str],
        base: Baseline | None,
        full: bool,
        clock_read: bool,
    ) -> None:
        """Keep ``view`` for the next cycle; ``base``: the view before it.

        ``clock_read``: whether the look read a service listing to measure Nova's clocks.
        """
        started, reported = self._nova.first_answer_at, self._nova.newest_report_at
        self._clock_due = False
        if started is not None and reported is not None:
            self._ahead = started - reported
            self._clock_due = _clocks_disagree(started, reported) is not None
        elif clock_read:
            self._ahead = None  # NOTE: asked for, and no report time came
        # NOTE: a look that reads no service listing (it costs Nova every service of the
        # cloud) dates its changes from its own Date less the API node's lead over the
        # reports last measured; a full look measures it again while in doubt.
        self.clock_ahead = self._ahead.total_seconds() if self._ahead is not None else None
        if started is None or self._ahead is None:
            self._clock_due = True
            self.invalidate(
                "Nova's answers carry no Date"
                if started is None
                else "Nova's service listing carries no report time"
            )
            return
        since = min(started, started - self._ahead) - SAFETY_MARGIN
        incremental = 0 if full or base is None else base.incremental + 1
        same_host = base is not None and base.view.host == view.host
        earlier = base.view.lookups if base is not None and same_host else {}
        self._baseline = Baseline(view, domains, since, incremental, earlier)
        self._doubt = None
        if self._last_start is not None and started < self._last_start:
            # NOTE: Nova's clock went back: its stamps and ours may not compare.
            self._clock_due = True
            self.invalidate(f"Nova's clock went back from {self._last_start} to {started}")
        self._last_start = started
        off = _clocks_disagree(started, reported) if reported is not None else None
        if off is not None:
            LOG.warning(
                "Nova's clocks disagree, every look at Nova is full until they agree: %s", off
            )
            self.invalidate(off)


def _changed(kept: Server | None, shown: Server | None) -> bool:
    """Whether ``GET /servers/{id}`` shows the server of a kept record changed since.

    NOTE: asked of the server's own cell through its instance mapping (a down cell
    answers partially at 2.69: ``show`` raises), not a filtered listing, which would
    skip that cell and say "unchanged". The row's ``updated_at`` moves with every
    change; 404 is no live record (none, deleted or archived).
    """
    if kept is None or kept.deleted or shown is None:
        return (kept is None or kept.deleted) != (shown is None)
    return (shown.updated_at, shown.host) != (kept.updated_at, kept.host)


def _why_full(base: Baseline | None, host: str, full_every: int) -> str | None:
    """Why the next observation must be a full look, or None."""
    if base is None:
        return "no earlier view"
    if base.view.host != host:
        return f"the host is now {host}, not {base.view.host}"
    if base.incremental + 1 >= full_every:
        return f"every {full_every} cycles"
    return None


def _clocks_disagree(date: datetime.datetime, reported: datetime.datetime) -> str | None:
    """Why Nova's ``Date`` and its newest service report are too far apart, or None.

    NOTE: ahead, the API node would date the next changes-since past changes its writers
    stamp earlier; behind, the changes it writes itself (a delete) are stamped earlier
    than the writers' time. A service that stopped reporting looks the same: that is
    not proof of a wrong clock, but no proof of a right one either.
    """
    ahead = date - reported
    if abs(ahead) <= SAFETY_MARGIN:
        return None
    way = "ahead of" if ahead > datetime.timedelta(0) else "behind"
    return (
        f"Nova's clock (Date {date.isoformat()}) is {abs(ahead)} {way} the newest report of "
        f"its compute services ({reported.isoformat()}), beyond the {SAFETY_MARGIN} margin"
    )
