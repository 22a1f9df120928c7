"""The Nova observer fails closed and keeps its request budget."""

from __future__ import annotations

import urllib.parse
import uuid as uuidlib
from typing import Any

import pytest

from nova_orphans.fakes.nova import START, Fault, SimulatedNova
from nova_orphans.observe.errors import (
    NovaAuthFailed,
    NovaBadAnswer,
    NovaCellDown,
    NovaError,
    NovaUnreachable,
)
from nova_orphans.observe.nova.api import MICROVERSION, default_retry
from nova_orphans.observe.nova.fleet import FleetNovaObserver
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.observe.nova.paging import MAX_LISTED, MAX_PAGES

HOST = "cmp-1"
NOVA = "http://nova.example:8774/v2.1"


def srv(host: str | None = HOST, status: str = "ACTIVE", **kw: Any) -> dict[str, Any]:
    item = {
        "id": kw.pop("id", str(uuidlib.uuid4())),
        "name": "vm",
        "status": status,
        "OS-EXT-SRV-ATTR:host": host,
        "OS-EXT-STS:vm_state": "deleted" if status == "DELETED" else "active",
        "OS-EXT-STS:task_state": None,
        "updated": "2026-11-01T12:00:00Z",
        "OS-SRV-USG:terminated_at": "2026-11-01T11:59:00.000000" if status == "DELETED" else None,
    }
    item.update(kw)
    return item


class ScriptedNova:
    """Answers like Nova (next links, ``max_limit``), or by ``override``; counts calls."""

    def __init__(self, servers: list[dict[str, Any]] | None = None, max_limit: int = 1000) -> None:
        self.servers = servers or []
        self.migrations: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self.override: Any = None
        self.max_limit = max_limit

    def get(self, path: str) -> tuple[int, Any]:
        self.requests.append(path)
        if self.override is not None:
            return self.override(path)
        url = urllib.parse.urlparse(path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/os-migrations":
            return 200, {"migrations": self.migrations}
        if url.path == "/os-services":
            return 200, {
                "services": [{"binary": "nova-compute", "host": HOST, "status": "enabled"}]
            }
        if url.path.startswith("/servers/") and url.path != "/servers/detail":
            found = [s for s in self.servers if s["id"] == url.path.split("/")[2]]
            if not found or found[0]["status"] == "DELETED":
                return 404, {"itemNotFound": {"code": 404, "message": "not found"}}
            return 200, {"server": found[0]}
        if "uuid" in q:
            return 200, {"servers": [s for s in self.servers if s["id"] == q["uuid"]]}
        live = [
            s
            for s in self.servers
            if s["OS-EXT-SRV-ATTR:host"] == q["host"] and s["status"] != "DELETED"
        ]
        if url.path == "/servers":  # the plain listing: id, name and links only
            live = [{"id": s["id"], "name": s["name"], "links": []} for s in live]
        return 200, nova_page(live, q, self.max_limit, url.path)


def nova_page(
    rows: list[dict[str, Any]], q: dict[str, str], max_limit: int, path: str = "/servers/detail"
) -> dict[str, Any]:
    """One page of ``rows`` the way Nova pages: limit capped to max_limit, a next link when full."""
    start = next((i + 1 for i, s in enumerate(rows) if s["id"] == q.get("marker")), 0)
    limit = min(int(q["limit"]), max_limit)
    page = rows[start : start + limit]
    body: dict[str, Any] = {"servers": page}
    if page and len(page) == limit:
        query = urllib.parse.urlencode(dict(sorted(q.items()), marker=page[-1]["id"]))
        body["servers_links"] = [{"rel": "next", "href": f"{NOVA}{path}?{query}"}]
    return body


def observer(nova: ScriptedNova, page_size: int = 1000) -> NovaObserver:
    return NovaObserver(nova, page_size=page_size, retry=lambda call: call())


def test_requests_are_constant_plus_one_per_unexplained_domain():
    servers = [srv() for _ in range(250)]
    nova = ScriptedNova(servers + [srv(status="DELETED", host=HOST)])
    orphan = nova.servers[-1]["id"]
    view = observer(nova, page_size=100).look(HOST, [s["id"] for s in servers] + [orphan])
    assert len(view.servers_here) == 250
    assert view.lookups[orphan] is not None and view.lookups[orphan].deleted
    # 3 pages of servers + 1 lookup + the host's cell answers + 1 migration page
    assert len(nova.requests) == 6


def test_paging_returns_every_server_exactly_once():
    servers = [srv() for _ in range(1000)]
    view = observer(ScriptedNova(servers), page_size=100).look(HOST, [])
    assert set(view.servers_here) == {s["id"] for s in servers}


def test_a_repeated_page_is_an_error_not_a_shorter_list():
    servers = [srv() for _ in range(20)]
    nova = ScriptedNova(servers)
    first = nova_page(servers, {"all_tenants": "1", "host": HOST, "limit": "10"}, 1000)
    nova.override = lambda path: (200, first)
    with pytest.raises(NovaBadAnswer, match="listed twice"):
        observer(nova, page_size=10).servers_on_host(HOST)


def test_a_page_longer_than_asked_is_an_error():
    nova = ScriptedNova()
    nova.override = lambda path: (200, {"servers": [srv() for _ in range(11)]})
    with pytest.raises(NovaBadAnswer, match="longer"):
        observer(nova, page_size=10).look(HOST, [])


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_raise(status):
    nova = ScriptedNova()
    nova.override = lambda path: (
        status,
        {"error": {"message": "The request you have made requires authentication."}},
    )
    with pytest.raises(NovaAuthFailed, match="requires authentication"):
        observer(nova).look(HOST, [])


def test_server_errors_are_retried_then_raised():
    nova = ScriptedNova()
    nova.override = lambda path: (503, None)
    obs = NovaObserver(nova, retry=default_retry(attempts=3, wait_seconds=0))
    with pytest.raises(NovaError, match="503"):
        obs.look(HOST, [])
    assert len(nova.requests) == 3


def test_a_transient_error_then_success_is_fine():
    nova = ScriptedNova([srv()])
    answers = iter([(500, None)])
    real = nova.get
    nova.get = lambda path: next(answers, None) or real(path)  # type: ignore[method-assign]
    view = NovaObserver(nova, retry=default_retry(attempts=3, wait_seconds=0)).look(HOST, [])
    assert len(view.servers_here) == 1


def test_unreachable_nova_raises():
    nova = ScriptedNova()

    def down(path: str) -> tuple[int, Any]:
        raise NovaUnreachable(endpoint="http://nova", reason="connection refused")

    nova.override = down
    with pytest.raises(NovaUnreachable):
        observer(nova).look(HOST, [])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (None, "no 'servers' list"),
        ({"servers": "nope"}, "no 'servers' list"),
        ({"servers": [{"id": "not-a-uuid", "OS-EXT-SRV-ATTR:host": HOST}]}, "no UUID"),
        ({"servers": [{"id": str(uuidlib.uuid4()), "status": "ACTIVE"}]}, "server-attributes"),
        ({"servers": [srv(host="cmp-9")]}, "not 'cmp-1'"),
        (
            {"servers": [srv(status="DELETED", **{"OS-SRV-USG:terminated_at": "yesterday"})]},
            "bad time",
        ),
    ],
    ids=[
        "empty body",
        "servers not a list",
        "garbage id",
        "no admin attributes",
        "host filter ignored",
        "garbage time",
    ],
)
def test_garbage_answers_raise(body, match):
    nova = ScriptedNova()
    nova.override = lambda path: (200, body)
    with pytest.raises(NovaBadAnswer, match=match):
        observer(nova).servers_on_host(HOST) if "DELETED" not in str(body) else observer(
            nova
        ).look_up(body["servers"][0]["id"])


def test_a_lookup_that_ignores_the_uuid_filter_raises():
    nova = ScriptedNova([srv(host="cmp-2"), srv(host="cmp-3")])
    nova.override = lambda path: (200, {"servers": nova.servers})
    with pytest.raises(NovaBadAnswer, match="ignored the uuid filter"):
        observer(nova).look_up(nova.servers[0]["id"])


def test_lookup_distinguishes_live_deleted_and_never_heard_of():
    live, gone = srv(host="cmp-2"), srv(status="DELETED")
    obs = observer(ScriptedNova([live, gone]))
    assert obs.look_up(live["id"]).host == "cmp-2"
    record = obs.look_up(gone["id"])
    assert record.deleted and record.deleted_at.isoformat() == "2026-11-01T11:59:00+00:00"
    assert obs.look_up(str(uuidlib.uuid4())) is None


def deleted_listing_aware(nova: ScriptedNova) -> ScriptedNova:
    """Teach the scripted Nova `deleted=1&host=`: only deleted rows of that host."""
    real = nova.get

    def get(path: str) -> tuple[int, Any]:
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(path).query))
        if q.get("deleted") == "1":
            nova.requests.append(path)
            rows = [
                s
                for s in nova.servers
                if s["status"] == "DELETED" and s["OS-EXT-SRV-ATTR:host"] == q["host"]
            ]
            return 200, {"servers": rows}
        return real(path)

    nova.get = get  # type: ignore[method-assign]
    return nova


def test_many_deleted_guests_are_explained_by_one_listing_not_one_lookup_each():
    live = [srv() for _ in range(10)]
    gone = [srv(status="DELETED") for _ in range(20)]
    archived = [str(uuidlib.uuid4()) for _ in range(3)]
    nova = deleted_listing_aware(ScriptedNova(live + gone))
    view = observer(nova).look(HOST, [s["id"] for s in live + gone] + archived)
    assert all(view.lookups[s["id"]].deleted for s in gone)
    assert all(view.lookups[u] is None for u in archived)
    # host listing + deleted listing + one lookup per archived UUID + migrations, and
    # the one service listing that checks every cell answered ("no record" needs it)
    assert len(nova.requests) == 1 + 1 + 3 + 1 + 1


def test_a_deleted_listing_holding_a_live_server_is_an_error():
    nova = deleted_listing_aware(ScriptedNova([srv(status="DELETED") for _ in range(6)]))
    nova.servers[0]["status"] = "ACTIVE"
    nova.servers[0]["OS-EXT-STS:vm_state"] = "active"
    real = nova.get

    def lying(path: str) -> tuple[int, Any]:
        if "deleted=1" in path:
            return 200, {"servers": nova.servers}
        return real(path)

    nova.get = lying  # type: ignore[method-assign]
    with pytest.raises(NovaBadAnswer, match="live or not on"):
        observer(nova).look(HOST, [s["id"] for s in nova.servers])


# --- re-verification: two endpoints must agree ---------------------------------------------


def simulated() -> tuple[SimulatedNova, NovaObserver]:
    sim = SimulatedNova()
    for host in (HOST, "cmp-2"):
        sim.add_compute(host)
    return sim, NovaObserver(sim, retry=lambda call: call())


def test_a_lookup_that_wrongly_says_no_record_is_caught_by_get_server():
    sim, obs = simulated()
    uuid = sim.boot("cmp-2", "vm")
    sim.inject(Fault.EMPTY, path="/servers/detail")  # the listing lies: "no such server"
    with pytest.raises(NovaBadAnswer, match="disagree"):
        obs.fresh_view(HOST, uuid)


def test_a_get_server_that_wrongly_says_404_is_caught_by_the_lookup():
    sim, obs = simulated()
    uuid = sim.boot("cmp-2", "vm")
    sim.inject(Fault.EMPTY, path=f"/servers/{uuid}")
    with pytest.raises(NovaBadAnswer, match="disagree"):
        obs.fresh_view(HOST, uuid)


def test_a_live_migration_hidden_from_os_migrations_is_seen_on_the_server():
    sim, obs = simulated()
    uuid = sim.boot(HOST, "vm")
    sim.live_migrate(uuid, "cmp-2", finish=False)
    sim.inject(Fault.EMPTY, path="/os-migrations")
    view = obs.fresh_view(HOST, uuid)
    assert [(m.migration_type, m.dest_compute) for m in view.migrations] == [
        ("live-migration", "cmp-2")
    ]


def test_a_deleted_server_is_deleted_through_both_endpoints():
    sim, obs = simulated()
    uuid = sim.boot(HOST, "vm")
    sim.local_delete(uuid)
    view = obs.fresh_view(HOST, uuid)
    assert view.lookups[uuid].deleted


# --- Nova's paging: follow the next links (docs/design.md rule 17) ----------------------------


def test_a_max_limit_below_the_page_size_still_lists_every_server_by_following_links():
    servers = [srv() for _ in range(5)]
    nova = ScriptedNova(servers, max_limit=2)  # Nova's [api] max_limit = 2 clamps limit=1000
    view = observer(nova).look(HOST, [])
    assert set(view.servers_here) == {s["id"] for s in servers}
    listing = [r for r in nova.requests if r.startswith("/servers/detail")]
    assert len(listing) == 3  # 2 + 2 + 1, the last page without a next link


def test_a_short_page_with_a_next_link_is_not_the_end():
    servers = [srv() for _ in range(3)]
    pages = iter([servers[:1], servers[1:]])

    def short_then_rest(path: str) -> tuple[int, Any]:
        if not path.startswith("/servers"):
            return 200, {"migrations": [], "services": []}
        page = next(pages)
        body: dict[str, Any] = {"servers": page}
        if len(page) == 1:
            body["servers_links"] = [
                {
                    "rel": "next",
                    "href": f"{NOVA}/servers/detail?all_tenants=1&host={HOST}&limit=10"
                    f"&marker={page[-1]['id']}",
                }
            ]
        return 200, body

    nova = ScriptedNova()
    nova.override = short_then_rest
    listed = observer(nova, page_size=10).servers_on_host(HOST)
    assert set(listed) == {s["id"] for s in servers}
    assert f"marker={servers[0]['id']}" in nova.requests[1]


def test_a_full_page_without_a_next_link_is_the_end():
    servers = [srv() for _ in range(10)]
    nova = ScriptedNova(servers)
    nova.override = lambda path: (200, {"servers": servers, "migrations": [], "services": []})
    assert len(observer(nova, page_size=10).servers_on_host(HOST)) == 10
    assert len(nova.requests) == 1


def linked(items: list[dict[str, Any]], marker: str, query: str | None = None) -> dict[str, Any]:
    query = query or f"all_tenants=1&host={HOST}&limit=2"
    href = f"{NOVA}/servers/detail?{query}&marker={marker}"
    return {"servers": items, "servers_links": [{"rel": "next", "href": href}]}


def test_a_next_link_back_to_a_marker_already_followed_is_an_error():
    a, b, c, d = (srv() for _ in range(4))
    answers = iter([linked([a, b], b["id"]), linked([c, d], b["id"])])
    nova = ScriptedNova()
    nova.override = lambda path: (200, next(answers))
    with pytest.raises(NovaBadAnswer, match=f"marker {b['id']} is not the page's last entry"):
        observer(nova, page_size=2).servers_on_host(HOST)
    assert len(nova.requests) == 2


@pytest.mark.parametrize(
    "listing",
    [
        lambda obs: obs.summaries_on_host(HOST),
        lambda obs: obs.changed_since(START),
        lambda obs: obs.deleted_on_host(HOST),
        lambda obs: obs.migrations_touching(HOST),
    ],
    ids=["host", "changes", "deleted", "migrations"],
)
def test_endless_next_links_fail_closed_at_the_first_page(listing):
    """docs/design.md rule 20: Nova's answers are hostile input. A simulated Nova whose every
    page is empty and links to a next one under a new marker: the first page fails the look
    (Nova links only a full page, by its last entry), one clear line, no second request."""
    sim = SimulatedNova()
    sim.add_compute(HOST)
    sim.boot(HOST, "vm")
    sim.inject(Fault.ENDLESS_LINKS, times=20_000)
    obs = NovaObserver(sim, retry=lambda call: call())
    with pytest.raises(NovaBadAnswer, match="a next link after an empty page") as failed:
        list(listing(obs))
    assert sim.request_count == 1
    assert "\n" not in str(failed.value)


def test_a_next_link_to_an_entry_not_last_on_its_page_fails_at_once():
    """docs/design.md rule 20: a link that does not advance past its page (to its first
    entry, or to an id the page does not end with) is not followed."""
    a, b = srv(), srv()
    for marker in (a["id"], str(uuidlib.uuid4())):
        nova = ScriptedNova()
        nova.override = lambda path, m=marker: (200, linked([a, b], m))
        with pytest.raises(NovaBadAnswer, match="is not the page's last entry"):
            observer(nova, page_size=2).servers_on_host(HOST)
        assert len(nova.requests) == 1


def endless_fresh_pages(nova: ScriptedNova, per_page: int, most: int):
    """Full, well-formed pages of new servers, each linking to the next by its last entry;
    a request beyond ``most`` fails the test (no Nova answers that many)."""

    def answer(path: str) -> tuple[int, Any]:
        assert len(nova.requests) <= most, f"{len(nova.requests)} requests and still paging"
        items = [{"id": str(uuidlib.uuid4()), "name": "vm", "links": []} for _ in range(per_page)]
        query = f"all_tenants=1&host={HOST}&limit=1000"
        href = f"{NOVA}/servers?{query}&marker={items[-1]['id']}"
        return 200, {"servers": items, "servers_links": [{"rel": "next", "href": href}]}

    return answer


def test_a_listing_of_new_servers_without_end_stops_at_what_a_listing_can_hold():
    """docs/design.md rule 20: full pages of fresh servers with well-formed links, at the
    default page size: the look fails after ``MAX_LISTED`` entries (101 pages of 1,000),
    not after 10,000 pages."""
    nova = ScriptedNova()
    nova.override = endless_fresh_pages(nova, 1000, most=MAX_LISTED // 1000 + 1)
    with pytest.raises(NovaBadAnswer, match=f"more than {MAX_LISTED} entries"):
        observer(nova).summaries_on_host(HOST)
    assert len(nova.requests) == MAX_LISTED // 1000 + 1


def test_a_listing_of_one_server_a_page_without_end_stops_at_max_pages():
    """Nova's ``[api] max_limit`` may shrink its pages to one entry; a listing that still
    links on after ``MAX_PAGES`` pages fails closed (before, 10,000 at the default size)."""
    nova = ScriptedNova()
    nova.override = endless_fresh_pages(nova, 1, most=MAX_PAGES)
    with pytest.raises(NovaBadAnswer, match=f"still a next link after {MAX_PAGES} pages"):
        observer(nova).summaries_on_host(HOST)
    assert len(nova.requests) == MAX_PAGES


@pytest.mark.parametrize(
    "query",
    ["all_tenants=1&limit=2", "all_tenants=1&host=cmp-9&limit=2"],
    ids=["filter dropped", "filter changed"],
)
def test_a_next_link_that_changes_the_query_is_an_error(query):
    a = srv()
    nova = ScriptedNova()
    nova.override = lambda path: (200, linked([a], a["id"], query))
    with pytest.raises(NovaBadAnswer, match="does not continue the listing"):
        observer(nova, page_size=2).look(HOST, [])


# --- a cell Nova cannot reach (docs/design.md rule 17) ----------------------------------------


def partial(uuid: str | None = None) -> dict[str, Any]:
    """A server of a down cell as Nova 2.69+ lists it (views/servers.py _show_from_down_cell)."""
    return {
        "id": uuid or str(uuidlib.uuid4()),
        "status": "UNKNOWN",
        "tenant_id": "p",
        "created": "2026-11-01T12:00:00Z",
        "links": [],
    }


def test_a_partial_record_in_a_listing_is_a_cell_error():
    nova = ScriptedNova()
    nova.override = lambda path: (200, {"servers": [srv(), partial()]})
    with pytest.raises(NovaCellDown, match="came back partial"):
        observer(nova).servers_on_host(HOST)


def down_cell_services(path: str) -> tuple[int, Any] | None:
    """Nova 2.69+'s service listing with cmp-2 in a cell that does not answer."""
    if not path.startswith("/os-services"):
        return None
    services = [
        {"binary": "nova-compute", "host": HOST, "status": "enabled"},
        {"binary": "nova-compute", "host": "cmp-2", "status": "UNKNOWN"},
    ]
    host = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(path).query)).get("host")
    return 200, {"services": [s for s in services if host in (None, s["host"])]}


def with_down_cell(nova: ScriptedNova) -> ScriptedNova:
    """Teach the scripted Nova a service listing where cmp-2's cell does not answer."""
    real = nova.get

    def get(path: str) -> tuple[int, Any]:
        answer = down_cell_services(path)
        if answer is None:
            return real(path)
        nova.requests.append(path)
        return answer

    nova.get = get  # type: ignore[method-assign]
    return nova


def test_no_record_for_a_domain_while_a_cell_is_down_is_a_cell_error():
    uuid = str(uuidlib.uuid4())
    nova = with_down_cell(ScriptedNova())
    with pytest.raises(NovaCellDown, match="'cmp-2' came back partial"):
        observer(nova).look(HOST, [uuid])


def test_every_domain_explained_needs_only_the_hosts_cell():
    servers = [srv() for _ in range(3)]
    nova = with_down_cell(ScriptedNova(servers))
    view = observer(nova).look(HOST, [s["id"] for s in servers])
    assert len(view.servers_here) == 3
    assert [r for r in nova.requests if r.startswith("/os-services")] == [
        f"/os-services?binary=nova-compute&host={HOST}"
    ]


def test_the_hosts_own_cell_down_is_an_error_even_without_domains():
    sim, obs = simulated()
    sim.boot(HOST, "vm")  # a lost server: its domain is not here
    sim.down_cells.add("cell1")
    with pytest.raises(NovaCellDown, match=f"'{HOST}' came back partial"):
        obs.look(HOST, [])


def test_a_deleted_record_hidden_by_a_down_cell_is_not_taken_for_no_record():
    sim, obs = simulated()
    sim.add_compute("cmp-3", cell="cell2")
    uuid = sim.boot("cmp-3", "vm")
    sim.local_delete(uuid)
    sim.down_cells.add("cell2")
    with pytest.raises(NovaCellDown):
        obs.look(HOST, [uuid])
    with pytest.raises(NovaCellDown):
        obs.fresh_view(HOST, uuid)
    sim.down_cells.clear()
    assert obs.look(HOST, [uuid]).lookups[uuid].deleted


def test_re_verification_of_a_server_in_a_down_cell_is_a_cell_error():
    sim, obs = simulated()
    uuid = sim.boot(HOST, "vm")
    sim.down_cells.add(sim.server(uuid).cell)
    with pytest.raises(NovaCellDown, match="partial"):
        obs.fresh_view(HOST, uuid)


def test_the_fleet_service_listing_names_a_compute_host_of_a_down_cell():
    sim = SimulatedNova()
    sim.add_compute("cmp-1")
    sim.add_compute("cmp-2", cell="cell2")
    fleet = FleetNovaObserver(sim, retry=lambda call: call())
    assert fleet.compute_hosts() == ("cmp-1", "cmp-2")
    sim.down_cells.add("cell2")
    with pytest.raises(NovaCellDown, match="'cmp-2' came back partial"):
        fleet.compute_hosts()


def test_the_observer_asks_at_a_microversion_where_down_cells_show_up():
    assert tuple(map(int, MICROVERSION.split("."))) >= (2, 69)


# --------------------------------------------------------------------------- missing permissions
# The failure names the policy rule the credentials lack (nova_orphans/data/nova-policy.yaml).


def test_a_403_names_the_request_and_nova_s_policy_rule():
    nova, plain = ScriptedNova(), ScriptedNova()
    denied = "Policy doesn't allow os_compute_api:os-services:list to be performed."
    nova.override = lambda path: (
        (403, {"forbidden": {"code": 403, "message": denied}})
        if path.startswith("/os-services")
        else plain.get(path)
    )
    with pytest.raises(NovaAuthFailed) as caught:
        observer(nova).look(HOST, [])
    message = str(caught.value)
    assert "HTTP 403" in message and "/os-services?binary=nova-compute" in message
    assert "os_compute_api:os-services:list" in message
    assert "\n" not in message


def test_a_host_filter_nova_dropped_names_the_filters_rule():
    nova = ScriptedNova([srv(host=HOST), srv(host="cmp-2")])
    nova.override = lambda path: (200, {"servers": nova.servers})
    with pytest.raises(NovaBadAnswer, match="os_compute_api:servers:allow_all_filters"):
        observer(nova).servers_on_host(HOST)


def test_a_deleted_filter_nova_dropped_names_the_filters_rule():
    nova = ScriptedNova([srv(host=HOST)])
    nova.override = lambda path: (200, {"servers": nova.servers})
    with pytest.raises(NovaBadAnswer, match="os_compute_api:servers:allow_all_filters"):
        observer(nova).deleted_on_host(HOST)


def test_a_uuid_filter_nova_dropped_names_the_filters_rule():
    nova = ScriptedNova([srv(host="cmp-2"), srv(host="cmp-3")])
    nova.override = lambda path: (200, {"servers": nova.servers})
    with pytest.raises(NovaBadAnswer, match="os_compute_api:servers:allow_all_filters"):
        observer(nova).look_up(nova.servers[0]["id"])


def test_a_hidden_host_attribute_names_the_extended_attributes_rule():
    item = srv()
    del item["OS-EXT-SRV-ATTR:host"]
    nova = ScriptedNova()
    nova.override = lambda path: (200, {"servers": [item]})
    with pytest.raises(NovaBadAnswer, match="os_compute_api:os-extended-server-attributes"):
        observer(nova).servers_on_host(HOST)


def blank_hosts(uuid: str) -> dict[str, Any]:
    """A migration as Nova shows it without the rule for its hosts: every host field null."""
    return {
        "id": 7,
        "instance_uuid": uuid,
        "server_uuid": uuid,
        "source_compute": None,
        "dest_compute": None,
        "dest_host": None,
        "migration_type": "live-migration",
        "status": "running",
    }


def test_migrations_with_blanked_hosts_name_the_migrations_host_rule():
    nova = ScriptedNova()
    nova.migrations = [blank_hosts(str(uuidlib.uuid4()))]
    with pytest.raises(NovaBadAnswer, match="os_compute_api:os-migrations:index:host"):
        observer(nova).migrations_touching(HOST)


def test_a_server_s_migrations_with_blanked_hosts_name_the_server_migrations_host_rule():
    uuid = str(uuidlib.uuid4())
    nova = ScriptedNova()
    nova.override = lambda path: (200, {"migrations": [blank_hosts(uuid)]})
    with pytest.raises(NovaBadAnswer, match="os_compute_api:servers:migrations:index:host"):
        observer(nova).live_migrations_in_progress(uuid)


def test_a_migration_with_one_host_is_a_migration():
    uuid = str(uuidlib.uuid4())
    nova = ScriptedNova()
    nova.migrations = [dict(blank_hosts(uuid), source_compute=HOST)]
    (migration,) = observer(nova).migrations_touching(HOST)
    assert migration.source_compute == HOST and migration.dest_compute is None
