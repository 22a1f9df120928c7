"""The fleet's cheap Nova side (each host's plain listing, details only where they can change a
finding, one lookup per UUID for the whole fleet) gives exactly the findings of the detail
listing of the whole cloud it replaced, in every situation the detail view could hide, and
within the request budget the design gives (docs/design.md §9).

The reference (``fakes.nova_reference.reference_fleet_views``) is the fleet observation as it
was: every live server of the cloud in detail, a lookup per UUID that listing does not explain,
every migration. Both run over the same simulated Nova and the findings of every host — kind,
reason, domain and Nova's record — must be equal.
"""

from __future__ import annotations

import datetime
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from nova_orphans.classify.guests import classify
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.fakes.nova_reference import reference_fleet_views
from nova_orphans.fleet.audit import fleet_audit
from nova_orphans.fleet.records import RUNNING_STATES, MergedFleet
from nova_orphans.fleet.scan import HostScan
from nova_orphans.model import Domain, DomainState, Finding, Kind, Selector
from nova_orphans.observe.errors import NovaBadAnswer, NovaCellDown, NovaError
from nova_orphans.observe.nova.fleet import FleetNovaObserver
from nova_orphans.observe.nova.observer import NovaObserver
from tests.unit.observe import test_cheap_listing as single
from tests.unit.observe.test_cheap_listing import DENIED, HOST, OTHER, domain

NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
THIRD = "cmp-3"
HOSTS = (HOST, OTHER, THIRD)
Fleet = dict[str, list[Domain]]
# Each cross-host case: one situation, made in Nova, with domains on some of the hosts.
CrossCase = Callable[[SimulatedNova, Fleet], None]


def copy(uuid: str, state: DomainState = DomainState.RUNNING) -> Domain:
    base = domain(uuid)
    return Domain(base.uuid, base.name, state, True, False, base.metadata)


def split_brain(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(HOST)
    fleet[HOST].append(copy(uuid))
    fleet[OTHER].append(copy(uuid))


def split_brain_nova_elsewhere(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(THIRD)
    fleet[HOST].append(copy(uuid))
    fleet[OTHER].append(copy(uuid, DomainState.BLOCKED))


def split_brain_deleted(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(OTHER)
    sim.local_delete(uuid)
    fleet[OTHER].append(copy(uuid))
    fleet[THIRD].append(copy(uuid))


def split_brain_unknown(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim._uuid(f"unknown-split-{sum(map(len, fleet.values()))}")
    fleet[HOST].append(copy(uuid))
    fleet[THIRD].append(copy(uuid))


def duplicate(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(HOST)
    fleet[HOST].append(copy(uuid))
    fleet[OTHER].append(copy(uuid, DomainState.SHUTOFF))


def duplicate_paused_migration(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(OTHER)
    sim.live_migrate(uuid, THIRD, finish=False)
    fleet[OTHER].append(copy(uuid))
    fleet[THIRD].append(copy(uuid, DomainState.PAUSED))


def deleted_on_two_hosts(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(THIRD)
    sim.local_delete(uuid)
    fleet[THIRD].append(copy(uuid, DomainState.SHUTOFF))
    fleet[HOST].append(copy(uuid, DomainState.SHUTOFF))


def soft_deleted_with_a_copy_elsewhere(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(OTHER)
    sim.soft_delete(uuid)
    fleet[OTHER].append(copy(uuid, DomainState.SHUTOFF))
    fleet[HOST].append(copy(uuid, DomainState.SHUTOFF))


def misplaced_after_migration(sim: SimulatedNova, fleet: Fleet) -> None:
    uuid = sim.boot(OTHER)
    sim.live_migrate(uuid, THIRD, cleanup_failed=True)
    fleet[OTHER].append(copy(uuid, DomainState.SHUTOFF))
    fleet[THIRD].append(copy(uuid))


def lost_on_third(sim: SimulatedNova, fleet: Fleet) -> None:
    sim.boot(THIRD)


def managed_on_each(sim: SimulatedNova, fleet: Fleet) -> None:
    for host in HOSTS:
        fleet[host].append(copy(sim.boot(host)))


CROSS: list[CrossCase] = [
    split_brain,
    split_brain_nova_elsewhere,
    split_brain_deleted,
    split_brain_unknown,
    duplicate,
    duplicate_paused_migration,
    deleted_on_two_hosts,
    soft_deleted_with_a_copy_elsewhere,
    misplaced_after_migration,
    lost_on_third,
    managed_on_each,
]


def world(
    single_cases: list[single.Case], cross: list[CrossCase], max_limit: int = 1000
) -> tuple[SimulatedNova, Fleet]:
    """The single-host situations on HOST (their other host is OTHER), the cross-host ones
    over all three hosts; every host is audited."""
    sim = SimulatedNova()
    for host in HOSTS:
        sim.add_compute(host)
    sim.max_limit = max_limit
    fleet: Fleet = {host: [] for host in HOSTS}
    for case in single_cases:
        case(sim, fleet[HOST])
    for cross_case in cross:
        cross_case(sim, fleet)
    return sim, fleet


#: Each host's findings (in the order of ``Kind``, then UUID), and under ``SPLIT`` one
#: pseudo-finding per split-brain UUID.
Found = dict[str, list[Any]]
SPLIT = "split-brain across hosts"
DENY = Selector(name_patterns=(DENIED,))


def merged(sim: SimulatedNova, fleet: Fleet, page_size: int = 1000) -> MergedFleet:
    scans = [HostScan(h, f"test:///{h}", tuple(ds)) for h, ds in fleet.items()]
    nova = FleetNovaObserver(sim, page_size=page_size, retry=lambda call: call())
    return fleet_audit(scans, nova, HOSTS, NOW, DENY)


def cheap(sim: SimulatedNova, fleet: Fleet, page_size: int = 1000) -> Found:
    result = merged(sim, fleet, page_size)
    found: Found = {h.host: [f.finding for f in h.findings] for h in result.hosts}
    return found | {SPLIT: [(c.uuid, c.running_on) for c in result.split_brain]}


def detailed(sim: SimulatedNova, fleet: Fleet, page_size: int = 1000) -> Found:
    """The reference: each host classified over the detail listing's views; split-brain
    where a UUID runs on two or more hosts (none of these situations migrates it)."""
    nova = NovaObserver(sim, page_size=page_size, retry=lambda call: call())
    views = reference_fleet_views(nova, fleet)
    found: Found = {h: classify(ds, views[h], DENY) for h, ds in fleet.items()}
    running: dict[str, list[str]] = {}
    for host, domains in fleet.items():
        for d in domains:
            if d.state in RUNNING_STATES:
                running.setdefault(d.uuid, []).append(host)
    split = [(u, tuple(sorted(hs))) for u, hs in sorted(running.items()) if len(hs) >= 2]
    return found | {SPLIT: split}


def findings(found: Found) -> list[list[Finding]]:
    """The hosts' findings, without the split-brain pseudo-findings."""
    return [fs for host, fs in found.items() if host != SPLIT]


def both_ways(sim: SimulatedNova, fleet: Fleet, page_size: int = 1000) -> tuple[Any, Any]:
    return detailed(sim, fleet, page_size), cheap(sim, fleet, page_size)


@pytest.mark.parametrize("case", CROSS, ids=lambda c: c.__name__)
def test_each_cross_host_situation_gives_the_findings_of_the_detail_listing(
    case: CrossCase,
) -> None:
    sim, fleet = world([single.managed], [managed_on_each, case])
    before, now = both_ways(sim, fleet)
    assert now == before
    assert all(f.server is None or not f.server.summary for fs in findings(now) for f in fs)


@pytest.mark.parametrize("case", single.CASES, ids=lambda c: c.__name__)
def test_each_single_host_situation_in_a_fleet_gives_the_findings_of_the_detail_listing(
    case: single.Case,
) -> None:
    sim, fleet = world([single.managed, case], [managed_on_each])
    before, now = both_ways(sim, fleet)
    assert now == before
    assert all(f.server is None or not f.server.summary for fs in findings(now) for f in fs)


def test_every_situation_together_gives_the_findings_of_the_detail_listing() -> None:
    sim, fleet = world(single.CASES * 2, CROSS * 2)
    before, now = both_ways(sim, fleet)
    assert now == before
    kinds = {f.kind.value for fs in findings(now) for f in fs}
    assert kinds == {"deleted", "unknown", "misplaced", "lost", "foreign", "protected"}
    assert now[SPLIT]
    split = [c.reason for c in merged(sim, fleet).split_brain]
    for says in ("Nova places it on cmp-1", "Nova places it on cmp-3", "only as deleted",
                 "Nova has no record"):  # fmt: skip
        assert any(says in reason for reason in split), says


@pytest.mark.parametrize("seed", range(30))
def test_random_fleets_small_pages_and_bulk_paths_give_the_same_findings(seed: int) -> None:
    rng = random.Random(seed)
    singles = [rng.choice(single.CASES) for _ in range(rng.randint(0, 40))]
    cross = [rng.choice(CROSS) for _ in range(rng.randint(1, 25))]
    sim, fleet = world(singles, cross, max_limit=rng.choice([1000, 7, 3]))
    before, now = both_ways(sim, fleet, page_size=rng.choice([1000, 5]))
    assert now == before


# --- what it costs --------------------------------------------------------------------------


def counted(sim: SimulatedNova, fleet: Fleet) -> tuple[Found, list[str]]:
    sim.log.clear()
    found = cheap(sim, fleet)
    return found, list(sim.log)


def paths(asked: list[str]) -> list[str]:
    return [a.split("?")[0] for a in asked]


def test_a_fleet_where_nova_explains_every_domain_costs_a_listing_per_host_and_two_more() -> None:
    sim, fleet = world([], [managed_on_each] * 30)
    found, asked = counted(sim, fleet)
    assert not any(found.values())
    # a plain listing per host, the host filter probe, every cell's services
    assert sorted(paths(asked)) == ["/os-services"] + ["/servers"] * (len(HOSTS) + 1)
    assert asked[-1] == "/os-services?binary=nova-compute"
    assert not any("detail" in a or "migrations" in a for a in asked)


def test_one_lookup_per_uuid_however_many_hosts_hold_it_and_migrations_only_where_needed() -> None:
    sim, fleet = world([], [managed_on_each, split_brain, deleted_on_two_hosts])
    found, asked = counted(sim, fleet)
    assert len(found.pop(SPLIT)) == 1
    assert {f.kind for fs in found.values() for f in fs} == {Kind.MISPLACED, Kind.DELETED}
    lookups = [a for a in asked if a.startswith("/servers/detail?") and "uuid=" in a]
    # the split-brain pair and the deleted guest defined on two hosts: one lookup each
    assert len(lookups) == len(set(lookups)) == 2
    migrations = sorted(a for a in asked if a.startswith("/os-migrations?host="))
    # HOST holds both, OTHER the split-brain copy, THIRD the deleted guest: each explains one
    assert migrations == [f"/os-migrations?host={h}&limit=1000" for h in sorted(HOSTS)]
    # the split-brain candidate's own migrations (the merge's excuse), its lookup reused
    assert len([a for a in asked if a.startswith("/os-migrations?instance_uuid=")]) == 1
    # the lookups proved the admin filters: no probe
    assert len([a for a in asked if paths([a]) == ["/servers"]]) == len(HOSTS)
    assert len(asked) == len(HOSTS) + 2 + 3 + 1 + 1


def test_a_host_listing_longer_than_nova_pages_follows_the_next_links() -> None:
    sim, fleet = world([], [managed_on_each] * 12, max_limit=5)
    found, asked = counted(sim, fleet)
    assert not any(found.values())
    # 12 servers per host in pages of 5: three pages each
    assert paths(asked).count("/servers") == 3 * len(HOSTS) + 1


def test_no_more_requests_are_in_flight_than_the_nova_concurrency() -> None:
    sim, fleet = world([], [managed_on_each])
    for n in range(10):
        sim.add_compute(f"cmp-x{n}")
        fleet[f"cmp-x{n}"] = [copy(sim.boot(f"cmp-x{n}"))]
    lock, running, most = threading.Lock(), [0], [0]

    class Slow:
        def get(self, path: str) -> tuple[int, Any]:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            try:
                time.sleep(0.02)
                return sim.get(path)
            finally:
                with lock:
                    running[0] -= 1

    nova = FleetNovaObserver(Slow(), retry=lambda call: call(), concurrency=3)
    views = nova.look_at_hosts({h: [d.uuid for d in ds] for h, ds in fleet.items()}, {})
    assert len(views) == len(fleet) and most[0] == 3


# --- failing closed (docs/design.md rules 3 and 17) ------------------------------------------


def test_credentials_whose_host_filter_nova_drops_are_refused_by_the_probe() -> None:
    """HOST came back after its servers were evacuated to OTHER (not scanned): with the host
    filter dropped, HOST's listing would hold the whole cloud and every domain would look
    managed there; nothing else asked proves the filters, so the probe must."""
    sim, fleet = world([single.evacuated] * 3, [])
    del fleet[OTHER], fleet[THIRD]
    sim.allow_all_filters = False
    with pytest.raises(NovaBadAnswer, match="ignored the host filter"):
        cheap(sim, fleet)
    sim.allow_all_filters = True
    found = cheap(sim, fleet)
    assert [f.kind for f in found[HOST]] == [Kind.MISPLACED] * 3


def test_credentials_whose_filters_nova_drops_are_refused_by_a_lookup() -> None:
    sim, fleet = world([single.evacuated] * 3, [managed_on_each])
    sim.allow_all_filters = False
    with pytest.raises(NovaBadAnswer, match="ignored the uuid filter"):
        cheap(sim, fleet)


def test_a_down_cell_is_an_error_not_a_host_without_servers() -> None:
    sim, fleet = world([], [managed_on_each])
    sim.add_compute("cmp-9", cell="cell2")
    fleet["cmp-9"] = [copy(sim.boot("cmp-9"))]
    sim.down_cells.add("cell2")
    with pytest.raises(NovaCellDown):
        cheap(sim, fleet)


@pytest.mark.parametrize("where", ["/servers?all_tenants=1&host=cmp-2", "/os-services"])
def test_a_failing_request_fails_the_whole_fleet_view(where: str) -> None:
    sim, fleet = world([], [managed_on_each] * 3)
    sim.inject(Fault.SERVER_ERROR, path=where)
    with pytest.raises(NovaError):
        cheap(sim, fleet)
