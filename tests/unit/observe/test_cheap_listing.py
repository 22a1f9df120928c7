"""The cheap listing (plain host listing, details only where they can change a finding) gives
exactly the findings of the full detail listing, in every situation the detail view could hide.

The reference is the observation as it was before: the host's detail listing, a lookup per
unexplained domain (a deleted listing in bulk from 5 on), every migration touching the host and
the cell check. Both run over the same simulated Nova (its plain ``GET /servers`` is Nova's
``index``: the same filters as the detail view, id and name only), and the findings — kind,
reason, domain and Nova's record — must be equal.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from nova_orphans.classify.guests import classify
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.fakes.nova_reference import reference_observe
from nova_orphans.model import Domain, DomainState, NovaMetadata, NovaView, Selector
from nova_orphans.observe.errors import NovaBadAnswer, NovaError
from nova_orphans.observe.nova.observer import BULK_LOOKUP_FROM, NovaObserver

HOST, OTHER = "cmp-1", "cmp-2"
DENIED = "denied-*"


def domain(uuid: str, name: str | None = None, nova: bool = True) -> Domain:
    return Domain(
        uuid,
        name or f"instance-{uuid[:8]}",
        DomainState.RUNNING,
        persistent=True,
        job_active=False,
        metadata=NovaMetadata("http://openstack.org/xmlns/libvirt/nova/1.1") if nova else None,
    )


# Each case: one situation, made in Nova, with or without a domain on HOST.
Case = Callable[[SimulatedNova, list[Domain]], None]


def managed(sim: SimulatedNova, domains: list[Domain]) -> None:
    domains.append(domain(sim.boot(HOST)))


def managed_busy(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.set_task_state(uuid, "rebooting")  # a task_state on a server managed here
    domains.append(domain(uuid))


def managed_stopped(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.server(uuid).vm_state = "stopped"
    domains.append(domain(uuid))


def soft_deleted_here(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.soft_delete(uuid)
    domains.append(domain(uuid))


def soft_deleted_without_domain(sim: SimulatedNova, domains: list[Domain]) -> None:
    sim.soft_delete(sim.boot(HOST))


def deleted(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.local_delete(uuid)
    domains.append(domain(uuid))


def archived(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.local_delete(uuid)
    del sim.servers[uuid]  # archived: this row alone (sim.archive would take every deleted row)
    domains.append(domain(uuid))


def live_migration_leftover(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.live_migrate(uuid, OTHER, cleanup_failed=True)
    domains.append(domain(uuid))


def live_migration_in_progress_out(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.live_migrate(uuid, OTHER, finish=False)  # task_state migrating, still here
    domains.append(domain(uuid))


def live_migration_in_progress_in(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(OTHER)
    sim.live_migrate(uuid, HOST, finish=False)  # the destination's domain already exists
    domains.append(domain(uuid))


def migration_in_progress_gone(sim: SimulatedNova, domains: list[Domain]) -> None:
    sim.live_migrate(sim.boot(HOST), OTHER, finish=False)  # no domain: not lost


def resized_here_awaiting_confirm(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(OTHER)
    sim.resize(uuid, HOST)  # VERIFY_RESIZE on this host: managed here
    domains.append(domain(uuid))


def resize_source_awaiting_confirm(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.resize(uuid, OTHER, migration_type="migration")
    domains.append(domain(uuid))


def evacuated(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.evacuate(uuid, OTHER)
    domains.append(domain(uuid))


def shelved_offloaded(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.shelve_offload(uuid)
    domains.append(domain(uuid))


def building(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    sim.server(uuid).vm_state = "building"  # no domain yet: not lost


def lost(sim: SimulatedNova, domains: list[Domain]) -> None:
    sim.boot(HOST)


def lost_busy(sim: SimulatedNova, domains: list[Domain]) -> None:
    sim.set_task_state(sim.boot(HOST), "rebuilding")


def elsewhere_busy(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(OTHER)
    sim.set_task_state(uuid, "migrating")
    domains.append(domain(uuid))


def denied_managed(sim: SimulatedNova, domains: list[Domain]) -> None:
    uuid = sim.boot(HOST)
    domains.append(domain(uuid, name=f"denied-{uuid[:8]}"))


def foreign(sim: SimulatedNova, domains: list[Domain]) -> None:
    domains.append(domain(sim._uuid(f"foreign-{len(domains)}"), nova=False))


def foreign_with_a_server_here(sim: SimulatedNova, domains: list[Domain]) -> None:
    domains.append(domain(sim.boot(HOST), nova=False))


CASES: list[Case] = [
    managed,
    managed_busy,
    managed_stopped,
    soft_deleted_here,
    soft_deleted_without_domain,
    deleted,
    archived,
    live_migration_leftover,
    live_migration_in_progress_out,
    live_migration_in_progress_in,
    migration_in_progress_gone,
    resized_here_awaiting_confirm,
    resize_source_awaiting_confirm,
    evacuated,
    shelved_offloaded,
    building,
    lost,
    lost_busy,
    elsewhere_busy,
    denied_managed,
    foreign,
    foreign_with_a_server_here,
]


def world(cases: list[Case], max_limit: int = 1000) -> tuple[SimulatedNova, list[Domain]]:
    sim = SimulatedNova()
    sim.add_compute(HOST)
    sim.add_compute(OTHER)
    sim.max_limit = max_limit
    domains: list[Domain] = []
    for case in cases:
        case(sim, domains)
    return sim, domains


def findings_both_ways(sim: SimulatedNova, domains: list[Domain], page_size: int = 1000):
    deny = Selector(name_patterns=(DENIED,))
    observer = NovaObserver(sim, page_size=page_size, retry=lambda call: call())
    uuids = [d.uuid for d in domains]
    before = classify(domains, reference_observe(observer, HOST, uuids), deny)
    denied = [d.uuid for d in domains if deny.covers(d)]
    cheap = classify(domains, observer.look(HOST, uuids, denied), deny)
    return before, cheap


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_each_situation_alone_gives_the_findings_of_the_detail_listing(case: Case) -> None:
    sim, domains = world([managed, managed, case])
    before, cheap = findings_both_ways(sim, domains)
    assert cheap == before
    assert all(f.server is None or not f.server.summary for f in cheap)


def test_every_situation_together_gives_the_findings_of_the_detail_listing() -> None:
    sim, domains = world(CASES * 2)
    before, cheap = findings_both_ways(sim, domains)
    assert cheap == before
    kinds = {f.kind.value for f in cheap}
    assert kinds == {"deleted", "unknown", "misplaced", "lost", "foreign", "protected"}


@pytest.mark.parametrize("seed", range(40))
def test_random_worlds_small_pages_and_bulk_paths_give_the_same_findings(seed: int) -> None:
    """Random mixes, many of a kind (so the bulk paths run: 5+ lost servers, 5+ unexplained
    domains), and Nova's max_limit or our page size below the host's size."""
    rng = random.Random(seed)
    cases = [rng.choice(CASES) for _ in range(rng.randint(1, 60))]
    sim, domains = world(cases, max_limit=rng.choice([1000, 7, 3]))
    before, cheap = findings_both_ways(sim, domains, page_size=rng.choice([1000, 5]))
    assert cheap == before


# --- lookups in flight at once ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_lookups_kept_in_flight_give_the_view_of_lookups_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    sim, domains = world([rng.choice(CASES) for _ in range(rng.randint(5, 40))])
    uuids = [d.uuid for d in domains]
    one_by_one = NovaObserver(sim, retry=lambda call: call()).look(HOST, uuids)
    sim.log.clear()
    at_once = NovaObserver(sim, retry=lambda call: call(), lookups_at_once=4).look(HOST, uuids)
    assert at_once == one_by_one
    lookups = [a for a in sim.log if a.startswith("/servers/detail?") and "uuid=" in a]
    assert len(lookups) == len(set(lookups))  # each asked once


def test_one_failed_lookup_among_many_in_flight_fails_the_whole_look() -> None:
    """Fail closed (docs/design.md rule 3): no view from the lookups that did answer."""
    sim, domains = world([managed] * 3 + [lost, evacuated, archived, evacuated])
    sim.inject(Fault.SERVER_ERROR, path="/servers/detail")
    observer = NovaObserver(sim, retry=lambda call: call(), lookups_at_once=4)
    with pytest.raises(NovaError):
        observer.look(HOST, [d.uuid for d in domains])


# --- what it costs --------------------------------------------------------------------------


def counted(sim: SimulatedNova, domains: list[Domain]) -> tuple[NovaView, list[str]]:
    sim.log.clear()
    observer = NovaObserver(sim, retry=lambda call: call())
    view = observer.look(HOST, [d.uuid for d in domains])
    return view, list(sim.log)


@pytest.mark.parametrize("size", [10, 999])
def test_a_host_where_nova_explains_every_domain_costs_three_requests(size: int) -> None:
    """(At 1,000 servers Nova's first page is full, so it links a second, empty one.)"""
    sim, domains = world([managed] * size)
    view, asked = counted(sim, domains)
    assert len(view.servers_here) == size
    # the plain listing, the host filter probe, the host's cell
    assert [a.split("?")[0] for a in asked] == ["/servers", "/servers", "/os-services"]
    assert not any(a.startswith("/servers/detail") for a in asked)


@pytest.mark.parametrize("candidates", [1, 4])
def test_each_unexplained_domain_or_lost_server_adds_one_request(candidates: int) -> None:
    sim, domains = world([managed] * 500 + [deleted, lost, archived, evacuated][:candidates])
    _, asked = counted(sim, domains)
    # plain listing, a lookup per candidate (which proves the filters: no probe),
    # the migrations (something to explain), every cell (a lookup found no record)
    assert len(asked) == 3 + candidates
    assert sum(a.startswith("/servers/detail") for a in asked) == candidates


# --- the admin filters (docs/design.md rule 3) ------------------------------------------------


def evacuation_seen_without_the_host_filter() -> tuple[SimulatedNova, list[Domain]]:
    """HOST came back after its servers were evacuated to OTHER: every server of the cloud has
    a domain here. With the host filter dropped the plain listing would list them all, and each
    domain would look managed here; only the probe tells."""
    sim, domains = world([evacuated] * 3)
    sim.allow_all_filters = False
    return sim, domains


def test_credentials_whose_host_filter_nova_drops_are_refused_by_the_probe() -> None:
    sim, domains = evacuation_seen_without_the_host_filter()
    with pytest.raises(NovaBadAnswer, match="ignored the host filter"):
        counted(sim, domains)
    sim.allow_all_filters = True
    view, _ = counted(sim, domains)
    assert not view.servers_here and all(v.host == OTHER for v in view.lookups.values())


def test_a_lookup_with_its_filter_dropped_is_refused_too() -> None:
    sim, domains = world([managed, managed, deleted])
    sim.allow_all_filters = False
    with pytest.raises(NovaBadAnswer, match="ignored the uuid filter"):
        counted(sim, domains)


def test_a_deleted_listing_with_its_filters_dropped_is_refused_too() -> None:
    sim, domains = world([managed] * 3 + [deleted] * BULK_LOOKUP_FROM)
    sim.allow_all_filters = False
    with pytest.raises(NovaBadAnswer, match="live or not on"):
        counted(sim, domains)
