"""The leftovers' raw facts from Neutron and Cinder: every page or none, bindings as Neutron
has them, the connector's host of an attachment; a hostile or inconsistent answer fails the
look (a ``ServiceError``: the kind reads "not checked", never "0 leftovers")."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

from nova_orphans.classify.leftover import LeftoverKind
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from nova_orphans.observe.services.client import MAX_PAGES, ServiceError
from nova_orphans.observe.services.leftovers import HostPorts, LeftoverObserver

HOST, SOURCE, OTHER = "cmp-1", "cmp-0", "cmp-2"
SERVER = "5e5e5e5e-0000-4000-8000-00000000005e"
VOLUME = "0a0a0a0a-0000-4000-8000-00000000000a"
OTHER_VOLUME = "0b0b0b0b-0000-4000-8000-00000000000b"


def port_id(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-00000000beef"


def attachment_id(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-0000000a77ac"


def observer(neutron: Any = None, cinder: Any = None) -> LeftoverObserver:
    return LeftoverObserver(neutron or SimNeutron(), cinder or SimCinder(), SimPlacement())


def neutron_with(ports: int, host: str = HOST, **kw: Any) -> SimNeutron:
    neutron = SimNeutron(**kw)
    for n in range(ports):
        neutron.add_port(port_id(n), f"fa:16:3e:00:00:{n % 256:02x}", SERVER, ("10.0.0.5",), host)
    return neutron


class Scripted:
    """A service that answers each ``GET`` with ``answer(path)``; records the paths."""

    def __init__(self, name: str, answer: Any) -> None:
        self.name = name
        self._answer = answer
        self.requests: list[str] = []

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        self.requests.append(path)
        return self._answer(path)


def query_of(path: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(path).query))


def port(n: int, host: Any = HOST, **kw: Any) -> dict[str, Any]:
    item = {
        "id": port_id(n),
        "device_id": SERVER,
        "device_owner": "compute:nova",
        "binding:host_id": host,
        "binding:vif_type": "ovs",
        "mac_address": "fa:16:3e:00:00:01",
        "fixed_ips": [{"ip_address": "10.0.0.5"}],
    }
    item.update(kw)
    return item


def linked(items: list[Any], marker: Any, key: str = "ports") -> dict[str, Any]:
    href = f"http://neutron.sim:9696/v2.0/{key}?binding%3Ahost_id={HOST}&marker={marker}"
    return {key: items, f"{key}_links": [{"rel": "next", "href": href}]}


# ---------------------------------------------------------------- Neutron's pages


def test_a_paging_neutron_s_ports_are_read_from_every_page():
    neutron = neutron_with(7, pagination_max_limit=3)
    ports = observer(neutron).ports_bound_to(HOST)
    assert [p.id for p in ports] == [port_id(n) for n in range(7)]
    markers = [query_of(p).get("marker") for p in neutron.requests]
    assert markers == [None, port_id(2), port_id(5)]
    # NOTE: each page asked by the filter and the last port's id, never by the link's own href.
    assert all(query_of(p)["binding:host_id"] == HOST for p in neutron.requests)


def test_a_full_last_page_is_followed_to_the_empty_one():
    neutron = neutron_with(6, pagination_max_limit=3)
    assert len(observer(neutron).ports_bound_to(HOST)) == 6
    assert len(neutron.requests) == 3


def test_without_pagination_max_limit_one_request_holds_every_port():
    neutron = neutron_with(1200)
    assert len(observer(neutron).ports_bound_to(HOST)) == 1200
    assert neutron.requests == [f"/v2.0/ports?binding%3Ahost_id={HOST}"]


def test_a_next_link_is_never_left_unread():
    """On today's main a port listing was one request: a second page was silently lost."""
    neutron = neutron_with(4, pagination_max_limit=2)
    ports = observer(neutron).ports_bound_to(HOST)
    assert len(ports) == 4


def test_a_listing_longer_than_the_pages_followed_fails_rather_than_ends_short():
    neutron = neutron_with(MAX_PAGES + 1, pagination_max_limit=1)
    with pytest.raises(ServiceError, match=f"goes on past {MAX_PAGES} pages"):
        observer(neutron).ports_bound_to(HOST)
    assert len(neutron.requests) == MAX_PAGES


def test_a_next_link_looping_back_to_the_same_page_fails():
    neutron = Scripted("Neutron", lambda path: (200, linked([port(1)], port_id(1))))
    with pytest.raises(ServiceError, match=r"listed port .* twice"):
        observer(neutron).ports_bound_to(HOST)
    assert len(neutron.requests) == 2


def test_a_next_link_that_does_not_go_on_from_the_last_port_fails():
    neutron = Scripted("Neutron", lambda path: (200, linked([port(1), port(2)], port_id(1))))
    with pytest.raises(ServiceError, match="links to a page it did not end"):
        observer(neutron).ports_bound_to(HOST)


@pytest.mark.parametrize(
    "links",
    [
        pytest.param([{"rel": "next", "href": "http://neutron/v2.0/ports"}], id="no marker"),
        pytest.param({"rel": "next", "href": "x?marker=y"}, id="links a dict"),
        pytest.param("next", id="links a string"),
    ],
)
def test_a_next_link_that_cannot_be_followed_fails(links):
    neutron = Scripted("Neutron", lambda path: (200, {"ports": [port(1)], "ports_links": links}))
    with pytest.raises(ServiceError, match="Neutron's port listing"):
        observer(neutron).ports_bound_to(HOST)


def test_an_empty_page_that_links_on_fails():
    neutron = Scripted("Neutron", lambda path: (200, linked([], "endless")))
    with pytest.raises(ServiceError, match="links to a page it did not end"):
        observer(neutron).ports_bound_to(HOST)


def test_a_previous_link_alone_ends_the_listing():
    href = f"http://neutron.sim:9696/v2.0/ports?marker={port_id(1)}&page_reverse=True"
    body = {"ports": [port(1)], "ports_links": [{"rel": "previous", "href": href}]}
    neutron = Scripted("Neutron", lambda path: (200, body))
    assert [p.id for p in observer(neutron).ports_bound_to(HOST)] == [port_id(1)]


def test_the_seen_ports_are_not_checked_when_a_page_fails():
    pages = iter([(200, linked([port(1)], port_id(1))), (500, {"NeutronError": {"message": "x"}})])
    neutron = Scripted("Neutron", lambda path: next(pages))
    seen = observer(neutron).look(HOST, None)
    assert seen.ports is None
    assert "HTTP 500" in seen.not_read[LeftoverKind.PORT]


# ---------------------------------------------------------------- bindings


def test_a_port_migrating_here_is_in_flight_not_bound_here():
    """On today's main a port with an inactive binding here failed the whole look."""
    neutron = neutron_with(2)
    neutron.add_port(port_id(9), "fa:16:3e:00:00:09", SERVER, ("10.0.0.9",), SOURCE)
    neutron.bind_inactive(port_id(9), HOST)
    found = observer(neutron).host_ports(HOST)
    assert found == HostPorts(
        bound=observer(neutron).ports_bound_to(HOST), moving=frozenset({port_id(9)})
    )
    assert [p.id for p in found.bound] == [port_id(0), port_id(1)]


def test_a_port_activated_on_the_destination_is_in_flight_on_the_source():
    neutron = neutron_with(0)
    neutron.add_port(port_id(9), "fa:16:3e:00:00:09", SERVER, ("10.0.0.9",), SOURCE)
    neutron.bind_inactive(port_id(9), HOST)
    neutron.activate(port_id(9), HOST)
    assert observer(neutron).host_ports(SOURCE) == HostPorts((), frozenset({port_id(9)}))
    assert [p.id for p in observer(neutron).ports_bound_to(HOST)] == [port_id(9)]


def test_a_port_migrating_here_costs_one_listing_more_proving_the_filter():
    neutron = neutron_with(1)
    neutron.add_port(port_id(9), "fa:16:3e:00:00:09", SERVER, (), SOURCE)
    neutron.bind_inactive(port_id(9), HOST)
    observer(neutron).host_ports(HOST)
    assert [query_of(p)["binding:host_id"] for p in neutron.requests] == [
        HOST,
        "no-such-host.invalid",
    ]


def test_only_ports_bound_here_cost_no_more_than_the_listing():
    neutron = neutron_with(3)
    observer(neutron).host_ports(HOST)
    assert len(neutron.requests) == 1


def test_a_neutron_that_ignored_the_filter_fails_the_look():
    neutron = neutron_with(2)
    for n, host in enumerate([OTHER, SOURCE, "", OTHER]):
        neutron.add_port(port_id(10 + n), f"fa:16:3e:00:01:{n:02x}", SERVER, (), host)
    neutron.answer = lambda route, query: (200, {"ports": neutron.ports})  # type: ignore[method-assign]
    with pytest.raises(ServiceError, match="ignored the binding:host_id filter"):
        observer(neutron).host_ports(HOST)


@pytest.mark.parametrize(
    "items",
    [
        pytest.param([{k: v for k, v in port(1).items() if k != "binding:host_id"}], id="absent"),
        pytest.param([port(1, host=None), port(2, host="")], id="blank in every port"),
        pytest.param(
            [port(1), {k: v for k, v in port(2).items() if k != "binding:host_id"}],
            id="absent in one",
        ),
    ],
)
def test_credentials_that_do_not_see_bindings_fail_the_look(items):
    neutron = Scripted("Neutron", lambda path: (200, {"ports": items}))
    with pytest.raises(ServiceError, match=r"shows no binding:host_id .*get_port:binding:host_id"):
        observer(neutron).ports_bound_to(HOST)


def test_an_empty_listing_is_no_ports_bound_here():
    neutron = Scripted("Neutron", lambda path: (200, {"ports": []}))
    assert observer(neutron).host_ports(HOST) == HostPorts((), frozenset())


@pytest.mark.parametrize(
    "body, match",
    [
        pytest.param({"ports": [port(1), "port"]}, "no 'ports' list", id="an entry no port"),
        pytest.param({"ports": {"id": "x"}}, "no 'ports' list", id="ports a dict"),
        pytest.param({}, "no 'ports' list", id="no ports"),
        pytest.param(["ports"], "no 'ports' list", id="a list"),
        pytest.param(
            {"ports": [port(1, host=["cmp-1"])]}, "no usable binding host", id="host a list"
        ),
        pytest.param(
            {"ports": [port(1, host="h" * 10_000)]}, "no usable binding host", id="host long"
        ),
        pytest.param({"ports": [port(1), port(1)]}, "listed port .* twice", id="twice"),
    ],
)
def test_a_hostile_port_listing_fails_the_look(body, match):
    neutron = Scripted("Neutron", lambda path: (200, body))
    with pytest.raises(ServiceError, match=match):
        observer(neutron).ports_bound_to(HOST)


def test_a_port_s_hostile_fields_are_bounded():
    item = port(1, id="p" * 100_000, device_owner="o" * 100_000, fixed_ips=5)
    neutron = Scripted("Neutron", lambda path: (200, {"ports": [item]}))
    (found,) = observer(neutron).ports_bound_to(HOST)
    assert len(found.id) == len(found.device_owner) == 255
    assert found.fixed_ips == ()


def test_a_port_s_many_fixed_ips_are_cut_to_sixteen():
    ips = [{"ip_address": f"10.0.{n // 256}.{n % 256}"} for n in range(5000)]
    neutron = Scripted("Neutron", lambda path: (200, {"ports": [port(1, fixed_ips=ips)]}))
    (found,) = observer(neutron).ports_bound_to(HOST)
    assert found.fixed_ips == tuple(f"10.0.0.{n}" for n in range(16))


def test_a_hostile_probe_answer_fails_the_look():
    def answer(path: str) -> tuple[int, Any]:
        if query_of(path)["binding:host_id"] == HOST:
            return 200, {"ports": [port(1, host=SOURCE)]}
        return 200, {"ports": "none"}

    with pytest.raises(ServiceError, match="no 'ports' list"):
        observer(Scripted("Neutron", answer)).host_ports(HOST)


# ---------------------------------------------------------------- Cinder's pages


def test_cinder_s_attachments_are_read_from_every_page():
    cinder = SimCinder(max_limit=2)
    for n in range(5):
        cinder.add_attachment(attachment_id(n), VOLUME, SERVER, "attached")
    assert [a.id for a in observer(cinder=cinder).attachments()] == [
        attachment_id(n) for n in range(5)
    ]
    assert len(cinder.requests) == 3


@pytest.mark.parametrize("links", ["next", {"rel": "next"}], ids=["a string", "a dict"])
def test_cinder_s_links_that_are_no_list_fail_the_look(links):
    """On today's main such links were read as "no next page": the listing ended short."""
    body = {"attachments": [{"id": attachment_id(1)}], "attachments_links": links}
    cinder = Scripted("Cinder", lambda path: (200, body))
    with pytest.raises(ServiceError, match="Cinder's attachment listing's links are no list"):
        observer(cinder=cinder).attachments()


# ---------------------------------------------------------------- the attachments' hosts


def test_each_attachment_s_connector_host_one_request_per_volume():
    cinder = SimCinder()
    cinder.add_attachment(attachment_id(1), VOLUME, SERVER, "attached", host=HOST)
    cinder.add_attachment(attachment_id(2), VOLUME, SERVER, "attached", host=OTHER)
    cinder.add_attachment(attachment_id(3), OTHER_VOLUME, SERVER, "attached", host=HOST)
    pairs = [(VOLUME, attachment_id(1)), (VOLUME, attachment_id(2))]
    pairs += [(OTHER_VOLUME, attachment_id(3)), (VOLUME, attachment_id(1))]
    hosts = observer(cinder=cinder).attachment_hosts(pairs)
    assert hosts == {attachment_id(1): HOST, attachment_id(2): OTHER, attachment_id(3): HOST}
    assert cinder.requests == [f"/volumes/{VOLUME}", f"/volumes/{OTHER_VOLUME}"]


def test_no_pairs_ask_nothing():
    cinder = SimCinder()
    assert observer(cinder=cinder).attachment_hosts([]) == {}
    assert cinder.requests == []


def test_an_attachment_with_no_connector_host_is_none():
    cinder = SimCinder()
    cinder.add_attachment(attachment_id(1), VOLUME, SERVER, "attached")
    assert observer(cinder=cinder).attachment_hosts([(VOLUME, attachment_id(1))]) == {
        attachment_id(1): None
    }


def test_an_attachment_the_volume_does_not_list_as_attached_is_absent():
    cinder = SimCinder()
    cinder.add_attachment(attachment_id(1), VOLUME, SERVER, "reserved", host=HOST)
    cinder.add_attachment(attachment_id(2), VOLUME, SERVER, "detached", host=HOST)
    pairs = [(VOLUME, attachment_id(1)), (VOLUME, attachment_id(2)), (VOLUME, attachment_id(3))]
    assert observer(cinder=cinder).attachment_hosts(pairs) == {}


def test_the_attachments_of_a_volume_cinder_has_no_more_are_absent():
    cinder = SimCinder()
    assert observer(cinder=cinder).attachment_hosts([(VOLUME, attachment_id(1))]) == {}
    assert cinder.requests == [f"/volumes/{VOLUME}"]


@pytest.mark.parametrize(
    "pair",
    [(VOLUME, "x; rm -rf /"), ("../../v3/attachments", attachment_id(1)), (VOLUME.upper(), "a")],
)
def test_a_pair_not_named_by_uuids_is_refused_unasked(pair):
    cinder = SimCinder()
    with pytest.raises(ServiceError, match="not named by UUIDs"):
        observer(cinder=cinder).attachment_hosts([pair])
    assert cinder.requests == []


def volume(*attachments: Any, **kw: Any) -> dict[str, Any]:
    return {"volume": {"id": VOLUME, "status": "in-use", "attachments": list(attachments), **kw}}


def attached(n: int, host: Any = HOST) -> dict[str, Any]:
    return {"attachment_id": attachment_id(n), "server_id": SERVER, "host_name": host}


@pytest.mark.parametrize(
    "status, body, match",
    [
        pytest.param(500, {"computeFault": {"message": "down"}}, "HTTP 500", id="500"),
        pytest.param(404, {"error": "no"}, "HTTP 404", id="a 404 not Cinder's"),
        pytest.param(200, {"volume": "v"}, "unusable", id="volume a string"),
        pytest.param(200, volume(attached(1), id=OTHER_VOLUME), "unusable", id="another volume"),
        pytest.param(200, volume(attached(1), attachments=None), "no 'attachments'", id="none"),
        pytest.param(200, volume(attached(1), "a"), "no 'attachments'", id="an entry no dict"),
        pytest.param(200, volume({"host_name": HOST}), "unusable attachment", id="no id"),
        pytest.param(200, volume(attached(1), attached(1)), "unusable attachment", id="twice"),
        pytest.param(200, volume(attached(1, host=5)), "no usable host", id="host a number"),
        pytest.param(200, volume(attached(1, host="h" * 10_000)), "no usable host", id="long"),
    ],
)
def test_a_hostile_volume_answer_fails_the_look(status, body, match):
    cinder = Scripted("Cinder", lambda path: (status, body))
    with pytest.raises(ServiceError, match=match):
        observer(cinder=cinder).attachment_hosts([(VOLUME, attachment_id(1))])


def test_an_empty_host_name_is_none():
    cinder = Scripted("Cinder", lambda path: (200, volume(attached(1, host=""))))
    hosts = observer(cinder=cinder).attachment_hosts([(VOLUME, attachment_id(1))])
    assert hosts == {attachment_id(1): None}
