"""The agent's incremental view of Nova: the same findings as a full look, at a cost that
follows the changes, not the host's size; a full look whenever anything is in doubt."""

from __future__ import annotations

import datetime
import random
import re
import threading
from collections.abc import Callable

import pytest

from nova_orphans.classify.guests import classify
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.model import Domain, DomainState, NovaMetadata, Selector
from nova_orphans.observe.errors import NovaBadAnswer, NovaCellDown, NovaError
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.observe.nova.tracker import NovaTracker

HOST, OTHER = "cmp-1", "cmp-2"
META = NovaMetadata("http://openstack.org/xmlns/libvirt/nova/1.1")
DENY = Selector(name_patterns=("denied-*",))


class Host:
    """A simulated Nova and the domains of HOST, changed together by the tests."""

    def __init__(self, servers: int = 0, full_every: int = 1000, lookups_at_once: int = 1) -> None:
        """``full_every`` and ``lookups_at_once``: the tracker's (``NovaTracker``,
        ``NovaObserver``)."""
        self.nova = SimulatedNova()
        self.nova.add_compute(HOST)
        self.nova.add_compute(OTHER)
        self.domains: dict[str, Domain] = {}
        for _ in range(servers):
            self.boot()
        self.later(60)  # the host has been running a while
        observer = NovaObserver(self.nova, retry=lambda c: c(), lookups_at_once=lookups_at_once)
        self.tracker = NovaTracker(observer, full_every=full_every)

    def boot(self, host: str = HOST, name: str | None = None) -> str:
        uuid = self.nova.boot(host)
        if host == HOST:
            self.define(uuid, name)
        return uuid

    def define(self, uuid: str, name: str | None = None) -> None:
        name = name or f"instance-{uuid[:8]}"
        self.domains[uuid] = Domain(uuid, name, DomainState.RUNNING, True, False, META)

    def later(self, minutes: float = 10) -> None:
        """The agent's interval passes (Nova's clock with it)."""
        self.nova.clock += datetime.timedelta(minutes=minutes)

    def tracked(self):
        domains = list(self.domains.values())
        denied = [d.uuid for d in domains if DENY.covers(d)]
        view = self.tracker.look(HOST, [d.uuid for d in domains], denied)
        return classify(domains, view, DENY)

    def full(self):
        domains = list(self.domains.values())
        observer = NovaObserver(self.nova, retry=lambda c: c())
        denied = [d.uuid for d in domains if DENY.covers(d)]
        return classify(domains, observer.look(HOST, [d.uuid for d in domains], denied), DENY)

    def both(self):
        """(incremental findings, full-look findings) of the world as it is now."""
        self.later()
        return self.tracked(), self.full()


# Changes between two cycles, in Nova and on the host, as they happen in a cloud.
Change = Callable[[Host, list[str]], None]


def deleted(h: Host, s: list[str]) -> None:
    h.nova.local_delete(s[0])  # the guest stays: deleted


def deleted_cleanly(h: Host, s: list[str]) -> None:
    h.nova.local_delete(s[0])
    del h.domains[s[0]]


def soft_deleted(h: Host, s: list[str]) -> None:
    h.nova.soft_delete(s[0])


def restored(h: Host, s: list[str]) -> None:
    h.nova.soft_delete(s[0])
    h.later()
    h.tracked()
    h.later()
    h.nova.restore(s[0])


def migrated_away(h: Host, s: list[str]) -> None:
    h.nova.live_migrate(s[0], OTHER)
    del h.domains[s[0]]


def migrated_away_leaving_a_duplicate(h: Host, s: list[str]) -> None:
    h.nova.live_migrate(s[0], OTHER, cleanup_failed=True)


def migrating_away(h: Host, s: list[str]) -> None:
    h.nova.live_migrate(s[0], OTHER, finish=False)


def migrated_in(h: Host, s: list[str]) -> None:
    uuid = h.boot(OTHER)
    h.later()
    h.tracked()
    h.nova.live_migrate(uuid, HOST)
    h.define(uuid)


def migrating_in(h: Host, s: list[str]) -> None:
    uuid = h.boot(OTHER)
    h.later()
    h.tracked()
    h.nova.live_migrate(uuid, HOST, finish=False)
    h.define(uuid)


def resized_away(h: Host, s: list[str]) -> None:
    h.nova.resize(s[0], OTHER)


def resize_confirmed_away(h: Host, s: list[str]) -> None:
    h.nova.resize(s[0], OTHER)
    h.later()
    h.tracked()
    h.nova.confirm(s[0])


def evacuated(h: Host, s: list[str]) -> None:
    h.nova.evacuate(s[0], OTHER)


def shelved_offloaded(h: Host, s: list[str]) -> None:
    h.nova.shelve_offload(s[0])


def task_state_set(h: Host, s: list[str]) -> None:
    h.nova.set_task_state(s[0], "rebooting")


def booted(h: Host, s: list[str]) -> None:
    h.boot()


def booted_without_domain(h: Host, s: list[str]) -> None:
    h.nova.boot(HOST)  # lost


def building(h: Host, s: list[str]) -> None:
    h.nova.server(h.nova.boot(HOST)).vm_state = "building"


def unknown_domain_appears(h: Host, s: list[str]) -> None:
    h.define(h.nova._uuid("never-booted"))


def deny_listed(h: Host, s: list[str]) -> None:
    h.boot(name="denied-vm")


def orphan_of_elsewhere_deleted(h: Host, s: list[str]) -> None:
    uuid = h.boot(OTHER)
    h.define(uuid)  # a duplicate of a server on OTHER: misplaced
    h.later()
    h.tracked()
    h.nova.local_delete(uuid)  # now deleted, only the cloud-wide listing sees it


def unknown_orphan_given_a_server(h: Host, s: list[str]) -> None:
    uuid = h.nova._uuid(f"unknown-{len(h.domains)}")
    h.define(uuid)  # Nova has no record: unknown
    h.later()
    h.tracked()
    h.nova.boot(OTHER, uuid=uuid)  # a server with its UUID appears: misplaced


def misplaced_orphan_migrated_back(h: Host, s: list[str]) -> None:
    uuid = h.boot(OTHER)
    h.define(uuid)  # misplaced
    h.later()
    h.tracked()
    h.nova.live_migrate(uuid, HOST)  # Nova's here again: managed


def soft_deleted_orphan_restored(h: Host, s: list[str]) -> None:
    h.nova.soft_delete(s[0])
    h.later()
    h.tracked()
    h.later()
    h.tracked()  # two cycles on the kept record
    h.nova.restore(s[0])


def deleted_orphan_gone_and_back_with_a_server(h: Host, s: list[str]) -> None:
    """The domain leaves while its server changes, and comes back: looked up afresh."""
    uuid = h.nova._uuid(f"away-{len(h.domains)}")
    h.define(uuid)
    h.later()
    h.tracked()  # unknown, kept
    domain = h.domains.pop(uuid)
    h.nova.boot(OTHER, uuid=uuid)
    h.later()
    h.tracked()  # the change is seen while the domain is away
    h.later()
    h.tracked()  # the change is now older than what the next cycle asks for
    h.domains[uuid] = domain


CHANGES: list[Change] = [
    deleted,
    deleted_cleanly,
    soft_deleted,
    restored,
    migrated_away,
    migrated_away_leaving_a_duplicate,
    migrating_away,
    migrated_in,
    migrating_in,
    resized_away,
    resize_confirmed_away,
    evacuated,
    shelved_offloaded,
    task_state_set,
    booted,
    booted_without_domain,
    building,
    unknown_domain_appears,
    deny_listed,
    orphan_of_elsewhere_deleted,
    unknown_orphan_given_a_server,
    misplaced_orphan_migrated_back,
    soft_deleted_orphan_restored,
    deleted_orphan_gone_and_back_with_a_server,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_a_change_between_cycles_gives_the_findings_of_a_full_look(change: Change) -> None:
    h = Host(servers=5)
    h.tracked()  # the full look the view starts from
    change(h, list(h.domains))
    tracked, full = h.both()
    assert not h.tracker.last_was_full
    assert tracked == full
    # and it stays right in the cycle after, with nothing new
    tracked, full = h.both()
    assert tracked == full


def test_every_change_together_over_many_cycles_gives_the_findings_of_full_looks() -> None:
    h = Host(servers=len(CHANGES) + 3)
    h.tracked()
    incremental = 0
    for change in CHANGES:
        change(h, [u for u in h.domains if h.nova.servers.get(u) and h.nova.server(u).host == HOST
                   and not h.nova.server(u).deleted and h.nova.server(u).vm_state == "active"
                   and not h.nova.server(u).task_state])  # fmt: skip
        tracked, full = h.both()
        assert tracked == full, change.__name__
        incremental += not h.tracker.last_was_full
    assert incremental == len(CHANGES)


# --- cost -----------------------------------------------------------------------------------


@pytest.mark.parametrize("servers", [10, 1000])
def test_a_cycle_with_no_changes_costs_the_same_few_requests_whatever_the_hosts_size(
    servers: int,
) -> None:
    h = Host(servers=servers)
    h.tracked()
    h.later()
    h.nova.log.clear()
    h.tracked()
    assert not h.tracker.last_was_full
    # the host's servers (ids, a page per thousand) and what changed on it (detail):
    # its cell answered them
    pages = servers // 1000 + 1
    since = h.nova.log[pages].split("changes-since=")[1].split("&")[0]
    assert [p.split("&marker=")[0] for p in h.nova.log] == [
        f"/servers?all_tenants=1&host={HOST}&limit=1000"
    ] * pages + [f"/servers/detail?all_tenants=1&host={HOST}&changes-since={since}&limit=1000"]


def orphans(h: Host, each: int) -> None:
    """``each`` domains deleted, misplaced, soft-deleted and unknown to Nova on the host."""
    for _ in range(each):
        h.nova.local_delete(h.boot())
        h.nova.soft_delete(h.boot())
        misplaced = h.boot(OTHER)
        h.define(misplaced)
        h.define(h.nova._uuid(f"never-booted-{len(h.domains)}"))


@pytest.mark.parametrize(("servers", "each"), [(10, 1), (1000, 25)])
def test_a_steady_cycle_with_orphans_asks_once_about_each_orphan(servers: int, each: int) -> None:
    """The domains Nova does not manage here are not looked up again when their servers
    did not change: ``GET /servers/{id}`` of each (its own cell answers it, whatever the
    rest of the cloud) shows whether it changed."""
    h = Host(servers=servers)
    orphans(h, each)
    h.later()
    h.tracked()
    h.later()
    h.tracked()  # a record is kept once two looks in a row agree
    watched = sorted(u for u in h.domains if u not in h.nova.servers or not (
        h.nova.server(u).host == HOST and h.nova.server(u).vm_state == "active"
        and not h.nova.server(u).deleted
    ))  # fmt: skip
    for _ in range(2):
        h.later()
        h.nova.log.clear()
        tracked = h.tracked()
        assert not h.tracker.last_was_full
        asked = [p for p in h.nova.log if "&marker=" not in p]  # a listing's first pages
        since = asked[1].split("changes-since=")[1].split("&")[0]
        assert asked == [
            f"/servers?all_tenants=1&host={HOST}&limit=1000",
            f"/servers/detail?all_tenants=1&host={HOST}&changes-since={since}&limit=1000",
        ] + [f"/servers/{u}" for u in watched]
        assert len(watched) == 4 * each
        assert len(tracked) == 4 * each and {f.kind.value for f in tracked} >= {
            "deleted",
            "misplaced",
            "unknown",
        }
        assert tracked == h.full()


def steady_with_orphans(lookups_at_once: int) -> Host:
    """A host of 40 servers and 3 orphans of each kind, its records kept, its tracker
    keeping ``lookups_at_once`` requests in flight."""
    h = Host(servers=40, lookups_at_once=lookups_at_once)
    orphans(h, 3)
    for _ in range(2):
        h.later()
        h.tracked()
    h.later()
    return h


def test_kept_records_shown_in_flight_at_once_give_the_cycle_of_one_by_one() -> None:
    one_by_one, at_once = steady_with_orphans(1), steady_with_orphans(4)
    for h in (one_by_one, at_once):
        misplaced = [
            u for u in h.domains if h.nova.servers.get(u) and h.nova.server(u).host == OTHER
        ]
        h.nova.set_task_state(misplaced[0], "rebooting")
        h.nova.log.clear()
    threads: set[str] = set()
    answer = at_once.nova.get

    def get(path: str) -> tuple[int, object]:
        if re.fullmatch(r"/servers/[0-9a-f-]{36}", path):
            threads.add(threading.current_thread().name)
        return answer(path)

    at_once.nova.get = get  # type: ignore[method-assign]
    tracked = at_once.tracked()
    assert not at_once.tracker.last_was_full
    assert len(threads) > 1 and all(t.startswith("nova-lookup") for t in threads)
    shown = [p for p in at_once.nova.log if re.fullmatch(r"/servers/[0-9a-f-]{36}", p)]
    assert len(shown) == len(set(shown)) == 12  # each kept record asked once
    assert tracked == at_once.full()
    assert [f.kind for f in tracked] == [f.kind for f in one_by_one.tracked()]


def test_one_failed_show_among_many_in_flight_fails_the_cycle() -> None:
    """Fail closed (docs/design.md rule 3): no view from the answers that did come."""
    h = steady_with_orphans(4)
    watched = sorted(
        u for u in h.domains if u not in h.nova.servers or h.nova.server(u).host != HOST
    )
    h.nova.inject(Fault.SERVER_ERROR, path=f"/servers/{watched[-1]}")
    with pytest.raises(NovaError):
        h.tracked()
    h.later()
    assert h.tracked() == h.full()
    assert h.tracker.last_was_full


def test_only_the_changed_orphans_are_looked_up_again() -> None:
    h = Host(servers=10)
    orphans(h, 3)
    h.tracked()
    h.later()
    h.tracked()  # the orphans' own changes are older than what the next cycle asks for
    h.later()
    misplaced = [u for u in h.domains if h.nova.servers.get(u) and h.nova.server(u).host == OTHER]
    h.nova.set_task_state(misplaced[0], "rebooting")
    h.nova.log.clear()
    tracked = h.tracked()
    assert not h.tracker.last_was_full
    lookups = [p for p in h.nova.log if p.startswith("/servers/detail?") and "uuid=" in p]
    assert lookups == [
        f"/servers/detail?all_tenants=1&uuid={misplaced[0]}&changes-since=1970-01-01T00%3A00%3A00Z"
    ]
    # the changed orphan's migrations are asked again with it
    assert any(p.startswith("/os-migrations?") for p in h.nova.log)
    assert tracked == h.full()


def test_a_changed_row_on_the_host_is_its_own_lookup() -> None:
    """The host's change listing gives the detail record a lookup would: a deleted row
    nova-compute's clean-up saves again (``cleaned``, every ``instance_delete_interval``),
    or a SOFT_DELETED server whose task changes, is filed from it, with no lookup of its
    own; the findings are a full look's."""
    h = Host(servers=10)
    orphans(h, 3)
    h.tracked()
    h.later()
    h.tracked()
    h.later()
    deleted = [u for u in h.domains if u in h.nova.servers and h.nova.server(u).deleted]
    soft = [
        u for u in h.domains if u in h.nova.servers and h.nova.server(u).vm_state == "soft-delete"
    ]
    for uuid in deleted:
        h.nova._update(uuid, h.nova.clock)  # the row saved again, nothing else changed
    h.nova.set_task_state(soft[0], "restoring")
    h.nova.log.clear()
    tracked = h.tracked()
    assert not h.tracker.last_was_full and len(deleted) == 3
    assert not [p for p in h.nova.log if p.startswith("/servers/detail?") and "uuid=" in p]
    assert {f.uuid: f.kind.value for f in tracked if f.uuid in deleted} == dict.fromkeys(
        deleted, "deleted"
    )
    assert tracked == h.full()


def test_a_kept_deleted_record_archived_since_lasts_until_the_next_full_look() -> None:
    """The known limit (docs/design.md §8): archival changes no row's updated_at. The kept
    record says deleted until the next full look; a step re-verifies afresh (rule 5,
    tests/agent/test_incremental_cycles.py)."""
    h = Host(servers=3, full_every=4)
    h.nova.local_delete(next(iter(h.domains)))
    h.later()
    h.tracked()  # a full look
    h.later()
    h.tracked()  # the record agrees: kept from now on
    h.nova.archive()
    tracked, full = h.both()
    assert not h.tracker.last_was_full
    assert [f.kind.value for f in tracked] == ["deleted"]
    assert [f.kind.value for f in full] == ["unknown"]
    tracked, full = h.both()
    assert [f.kind.value for f in tracked] == ["deleted"]
    tracked, full = h.both()
    assert h.tracker.last_was_full and tracked == full


def test_a_cycles_detail_records_are_in_proportion_to_the_changes() -> None:
    h = Host(servers=1000)
    h.tracked()
    h.later()
    changed = list(h.domains)[:3]
    for uuid in changed:
        h.nova.set_task_state(uuid, "rebooting")
    served: list[int] = []
    real = h.nova.get

    def counting(path: str):
        status, body = real(path)
        served.append(len(body.get("servers", [])) if isinstance(body, dict) else 0)
        return status, body

    h.nova.get = counting  # type: ignore[method-assign]
    h.tracked()
    assert not h.tracker.last_was_full
    # the host's ids (a page per thousand), and three records: not a thousand
    assert sum(served[:-1]) == 1000 and served[-1] == 3


# --- doubt: a full look -------------------------------------------------------------------


def test_a_full_look_every_n_cycles() -> None:
    h = Host(servers=3, full_every=3)
    kinds = []
    for _ in range(7):
        h.later()
        h.tracked()
        kinds.append(h.tracker.last_was_full)
    assert kinds == [True, False, False, True, False, False, True]


def test_every_cycle_is_a_full_look_with_full_look_every_1() -> None:
    h = Host(servers=3, full_every=1)
    for _ in range(3):
        h.later()
        h.tracked()
        assert h.tracker.last_was_full


def test_a_domain_gone_that_nova_does_not_explain_makes_a_full_look() -> None:
    h = Host(servers=3)
    h.tracked()
    gone = next(iter(h.domains))
    del h.domains[gone]  # Nova still has it here, unchanged: lost, or something is off
    tracked, full = h.both()
    assert h.tracker.last_was_full
    assert tracked == full and [f.kind.value for f in tracked] == ["lost"]


def test_a_failed_look_makes_the_next_one_full() -> None:
    h = Host(servers=3)
    h.tracked()
    h.later()
    h.nova.inject(Fault.SERVER_ERROR)
    with pytest.raises(NovaError):
        h.tracked()
    h.later()
    h.tracked()
    assert h.tracker.last_was_full


def test_invalidate_makes_the_next_look_full() -> None:
    h = Host(servers=3)
    h.tracked()
    h.tracker.invalidate("re-verification skipped a step")
    h.later()
    h.tracked()
    assert h.tracker.last_was_full


def test_without_novas_date_every_look_is_full() -> None:
    h = Host(servers=3)

    class NoDate:
        def get(self, path: str):
            return h.nova.get(path)

    h.tracker = NovaTracker(NovaObserver(NoDate(), retry=lambda c: c()), full_every=100)
    for _ in range(3):
        h.later()
        h.tracked()
        assert h.tracker.last_was_full


def test_novas_clock_going_back_makes_the_next_look_full() -> None:
    h = Host(servers=3)
    h.tracked()
    h.later()
    h.tracked()
    assert not h.tracker.last_was_full
    h.nova.clock -= datetime.timedelta(hours=1)
    h.tracked()
    h.later()
    h.tracked()
    assert h.tracker.last_was_full


def test_changes_are_asked_since_novas_clock_less_the_margin_not_ours() -> None:
    h = Host(servers=3)
    h.tracked()
    first = h.nova.date
    h.later()
    h.nova.log.clear()
    h.tracked()
    assert since_asked(h) == first - datetime.timedelta(minutes=5)


def since_asked(h: Host) -> datetime.datetime:
    """The ``changes-since`` of the first change listing in Nova's log."""
    since = next(p for p in h.nova.log if "changes-since=" in p and "uuid=" not in p)
    value = since.split("changes-since=")[1].split("&")[0].replace("%3A", ":")
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_an_api_clock_ahead_of_novas_writers_makes_every_look_full(caplog) -> None:
    """docs/design.md §8 and rule 20: an API node 10 minutes ahead of the clock that stamps
    Nova's rows and service reports would date the next changes-since past a delete stamped
    a second after the look, hiding it until the next full look. Its Date disagrees with the
    newest service report: every look is full, and the delete is seen at once."""
    h = Host(servers=3)
    h.nova.api_clock_offset = datetime.timedelta(minutes=10)
    h.tracked()
    gone = next(iter(h.domains))
    h.nova.local_delete(gone)
    tracked, full = h.both()
    assert tracked == full and [(f.uuid, f.kind.value) for f in tracked] == [(gone, "deleted")]
    assert h.tracker.last_was_full and h.tracker.clock_ahead == 600
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"][-1:]
    assert "0:10:00 ahead of the newest report of its compute services" in warning.getMessage()


def test_an_api_clock_behind_novas_writers_makes_every_look_full() -> None:
    """Behind by more than the margin, the changes the API node writes itself (a delete)
    are stamped earlier than the writers' time: no incremental look either."""
    h = Host(servers=3)
    h.nova.api_clock_offset = -datetime.timedelta(minutes=10)
    for _ in range(3):
        h.later()
        h.tracked()
        assert h.tracker.last_was_full
    assert h.tracker.clock_ahead == -600


def test_within_the_margin_changes_are_asked_since_the_earlier_of_date_and_reports() -> None:
    """An API node 4 minutes ahead agrees with the reports within the margin: incremental
    looks, dated from the report (the writers' clock), not from the node's Date."""
    h = Host(servers=3)
    h.nova.api_clock_offset = datetime.timedelta(minutes=4)
    h.tracked()
    reported = h.nova.clock
    gone = next(iter(h.domains))
    h.nova.local_delete(gone)
    h.later()
    h.nova.log.clear()
    tracked = h.tracked()
    assert not h.tracker.last_was_full
    assert since_asked(h) == reported - datetime.timedelta(minutes=5)
    assert [(f.uuid, f.kind.value) for f in tracked] == [(gone, "deleted")]


def test_a_service_listing_without_report_times_makes_every_look_full() -> None:
    """No report time, nothing to check Nova's Date against: every look is full."""
    h = Host(servers=3)

    class NoReports:
        @property
        def date(self) -> datetime.datetime | None:
            return h.nova.date

        def get(self, path: str):
            status, body = h.nova.get(path)
            for service in body.get("services", []) if isinstance(body, dict) else []:
                service.pop("updated_at", None)
            return status, body

    h.tracker = NovaTracker(NovaObserver(NoReports(), retry=lambda c: c()), full_every=100)
    for _ in range(3):
        h.later()
        h.tracked()
        assert h.tracker.last_was_full and h.tracker.clock_ahead is None


def test_a_cell_that_does_not_answer_fails_an_incremental_look_closed() -> None:
    """docs/design.md rule 17: the cloud-wide change listing skips a cell Nova cannot reach,
    so a server that moved into it would look unchanged, still managed here."""
    h = Host(servers=3)
    h.nova.add_compute("cmp-3", cell="cell2")
    h.tracked()
    moved = next(iter(h.domains))
    h.nova.live_migrate(moved, "cmp-3", cleanup_failed=True)  # its domain stays: misplaced
    h.nova.down_cells.add("cell2")
    h.later()
    with pytest.raises(NovaCellDown, match="'cmp-3' came back partial"):
        h.tracked()
    h.nova.down_cells.clear()
    tracked, full = h.both()
    assert tracked == full and [f.kind.value for f in tracked] == ["misplaced"]


def test_a_changed_server_that_lists_another_host_under_the_host_filter_is_refused() -> None:
    h = Host(servers=3)
    h.tracked()
    h.later()
    h.nova.set_task_state(next(iter(h.domains)), "rebooting")
    h.nova.allow_all_filters = False  # Nova now drops host=: every change of the cloud
    h.nova.boot(OTHER)
    with pytest.raises(NovaBadAnswer, match="not 'cmp-1'"):
        h.tracked()


# --- a steady cycle costs what concerns this host, whatever the rest of the cloud -------------


def steady_cycle_seen_by_nova(
    others: int, per_host: int = 50, archived: bool = False
) -> list[tuple[str, int]]:
    """Each request of HOST's steady cycle and the records its answer held, in a cloud of
    ``others`` other hosts of ``per_host`` servers each, 1 % of the cloud's servers changing
    between the cycles; HOST has ``per_host`` servers, an orphan of each kind, and its own
    changes (one rebooting, one migrated away, one deleted, its row ``archived`` too or
    not). The changes-since time is written ``T``: it follows Nova's clock, which each
    change moves a second on."""
    rng = random.Random(19)
    h = Host(servers=per_host)
    uuids = list(h.domains)
    h.nova.local_delete(h.boot())  # deleted
    h.define(h.boot(OTHER))  # misplaced: its server lives on OTHER
    h.define(h.nova._uuid("never-booted"))  # unknown
    hosts = [OTHER] + [f"cmp-{n}" for n in range(3, others + 2)]
    for host in hosts:
        for _ in range(per_host):
            h.nova.boot(host)
    h.later()
    h.tracked()
    h.later()
    h.tracked()  # records kept from here on
    h.later()
    elsewhere = sorted(u for u, s in h.nova.servers.items() if s.host in hosts[1:])
    for uuid in rng.sample(elsewhere, len(h.nova.servers) // 100):
        change = rng.choice(["reboot", "migrate", "delete"])
        if change == "reboot":
            h.nova.set_task_state(uuid, "rebooting")
        elif change == "migrate":
            h.nova.live_migrate(uuid, rng.choice(hosts[1:]))
        else:
            h.nova.local_delete(uuid)
    h.nova.set_task_state(uuids[0], "rebooting")
    h.nova.live_migrate(uuids[1], OTHER)
    del h.domains[uuids[1]]
    h.nova.local_delete(uuids[2])
    if archived:
        # its row goes (the kept deleted orphan's stays: a record kept is not asked about
        # again, see test_a_kept_deleted_record_archived_since_lasts_until_the_next_full_look)
        del h.nova.servers[uuids[2]]
    seen: list[tuple[str, int]] = []
    real = h.nova.get

    def counting(path: str):
        status, body = real(path)
        seen.append((re.sub(r"changes-since=[^&]+", "changes-since=T", path),
                     len(body.get("servers", body.get("migrations", body.get("services", []))))
                     if isinstance(body, dict) else 0))  # fmt: skip
        return status, body

    h.nova.get = counting  # type: ignore[method-assign]
    tracked = h.tracked()
    assert not h.tracker.last_was_full
    h.nova.get = real  # type: ignore[method-assign]
    assert tracked == h.full()
    kinds = {f.uuid: f.kind.value for f in tracked}
    assert kinds[uuids[2]] == ("unknown" if archived else "deleted") and uuids[1] not in kinds
    return seen


def test_a_steady_cycle_asks_nova_the_same_whatever_the_other_hosts_and_their_changes() -> None:
    """Issue 19: ten times the other hosts, their servers and their changes: the same
    requests, each answered with the same number of records."""
    small, large = steady_cycle_seen_by_nova(10), steady_cycle_seen_by_nova(100)
    assert small == large
    listings = [path for path, _ in small if path.startswith(("/servers?", "/servers/detail?"))]
    assert all("host=" in path or "uuid=" in path for path in listings), (
        "a listing of the whole cloud"
    )
    assert not any(path.startswith("/os-services?binary=nova-compute&") for path, _ in small)


def test_a_steady_cycles_requests_are_those_the_design_names() -> None:
    """docs/design.md §8: the host's plain listing, its changes, one question per kept record
    of a server elsewhere or of none, the lookups of what left or changed, and the cells
    only when a lookup found no record: here a server deleted and archived between the
    cycles, whose domain stayed."""
    seen = steady_cycle_seen_by_nova(10, archived=True)
    asked = [re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "U", p).split("&marker")[0] for p, _ in seen]
    assert asked == [
        f"/servers?all_tenants=1&host={HOST}&limit=1000",
        f"/servers/detail?all_tenants=1&host={HOST}&changes-since=T&limit=1000",
        "/servers/U",  # each orphan: the deleted, the misplaced and the unknown one
        "/servers/U",
        "/servers/U",
        # what left with its domain staying: the deleted-and-archived one (the migrated one
        # took its domain along, nothing to explain)
        "/servers/detail?all_tenants=1&uuid=U&changes-since=T",
        f"/os-migrations?host={HOST}&limit=1000",  # a domain to explain
        "/os-services?binary=nova-compute",  # a fresh "no record": every cell (rule 17)
    ]
    # the host's 50 servers less the two that left; the two changes still on it (the
    # rebooting one, and none other: the deleted one was archived)
    assert [rows for _, rows in seen[:2]] == [48, 1]


def clock_read(h: Host) -> bool:
    """Whether the last cycle read a service listing (Nova's clocks measured)."""
    return any(p.startswith("/os-services?") for p in h.nova.log)


def clocks_read_over(h: Host, cycles: int) -> list[bool]:
    """Whether each of the next ``cycles`` full looks read Nova's clocks; each look is
    checked to be full and to give the findings of a fresh full look."""
    read = []
    for _ in range(cycles):
        h.later()
        h.nova.log.clear()
        tracked = h.tracked()
        read.append(clock_read(h))
        assert h.tracker.last_was_full and tracked == h.full()
    return read


def test_the_agents_full_looks_read_the_service_listing_only_at_start_and_in_doubt() -> None:
    """docs/design.md §8: ``os-services?host=H`` costs Nova every compute service of the
    cloud: a full look whose host listing named servers (its cell answered) reads it only to
    measure Nova's clocks, at start and while in doubt (a failed look, clocks apart, Nova's
    clock gone back), never periodically; every look stays equal to a full look."""
    h = Host(servers=3, full_every=1)
    read = clocks_read_over(h, 60)
    assert [n for n, r in enumerate(read) if r] == [0]


@pytest.mark.parametrize("doubt", ["failed look", "clock went back"])
def test_a_doubt_makes_the_next_full_look_read_novas_clocks_once(doubt: str) -> None:
    """After a look that failed or Nova's clock going back, the next full look measures the
    clocks again; the ones after it, clocks agreeing, do not."""
    h = Host(servers=3, full_every=1)
    h.tracked()
    h.later()
    if doubt == "failed look":
        h.nova.inject(Fault.SERVER_ERROR)
        with pytest.raises(NovaError):
            h.tracked()
    else:
        h.nova.clock -= datetime.timedelta(hours=1)
        h.tracked()
    assert clocks_read_over(h, 3) == [True, False, False]


def test_clocks_apart_are_read_at_every_full_look_until_they_agree() -> None:
    """While the API node's Date is off the newest report, every look is full and reads the
    clocks; once they agree again, one more reading and incremental looks follow."""
    h = Host(servers=3)
    h.nova.api_clock_offset = datetime.timedelta(minutes=10)
    read = []
    for _ in range(3):
        h.later()
        h.nova.log.clear()
        h.tracked()
        read.append((clock_read(h), h.tracker.last_was_full))
    h.nova.api_clock_offset = datetime.timedelta(0)
    for _ in range(3):
        h.later()
        h.nova.log.clear()
        h.tracked()
        read.append((clock_read(h), h.tracker.last_was_full))
    assert read == [(True, True)] * 4 + [(False, False)] * 2
    assert h.tracker.clock_ahead == 0
