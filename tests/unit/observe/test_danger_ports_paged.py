"""docs/design.md rule 21's "a next page left unread is not checked", for the dangers too: the
MAC lookup follows Neutron's pages, so an address conflict on a later page is still found."""

from __future__ import annotations

import pytest

from nova_orphans.fakes.services import SimCinder, SimNeutron
from nova_orphans.observe.services.client import ServiceError
from nova_orphans.observe.services.dangers import DangerObserver

MACS = [f"fa:16:3e:00:01:{i:02x}" for i in range(5)]


def neutron(limit: int | None) -> SimNeutron:
    found = SimNeutron(pagination_max_limit=limit)
    for i, mac in enumerate(MACS):
        port, server = (
            f"{i:08x}-0000-4000-8000-00000000cafe",
            f"{i:08x}-0000-4000-8000-0000000000aa",
        )
        found.add_port(port, mac, server, (), "cmp-2")
    return found


@pytest.mark.parametrize("limit", [None, 1, 2])
def test_every_page_of_the_mac_lookup_is_read(limit):
    ports = DangerObserver(SimCinder(), neutron(limit)).ports_with(MACS)
    assert sorted(p.mac for p in ports) == MACS


def test_a_next_link_that_does_not_go_on_fails_the_lookup():
    broken = neutron(2)
    answer = broken.answer

    def looping(route, query):
        status, body = answer(route, {k: v for k, v in query.items() if k != "marker"})
        return status, body

    broken.answer = looping  # type: ignore[method-assign]
    with pytest.raises(ServiceError, match=r"twice|did not end"):
        DangerObserver(SimCinder(), broken).ports_with(MACS)
