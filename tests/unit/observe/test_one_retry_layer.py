"""One retry layer for every service (docs/design.md §8): tenacity's, three attempts; keystoneauth
retries nothing, and ``[nova]`` refuses its retry options, so attempts never multiply."""

from __future__ import annotations

from typing import Any

import pytest
from keystoneauth1 import exceptions as ks_exc

from nova_orphans import cli, exits
from nova_orphans.config import loading
from nova_orphans.observe import retry
from nova_orphans.observe.errors import NovaError
from nova_orphans.observe.nova.api import default_retry
from nova_orphans.observe.nova.endpoints import NovaEndpoints
from nova_orphans.observe.nova.session import transport_from_conf
from nova_orphans.observe.services.client import KeystoneClient, ServiceError, get_json
from tests.unit.config.test_absolute_instances_path import write


class Response:
    def __init__(self, status: int, body: Any = None) -> None:
        self.status_code, self._body = status, body
        self.content = b"{}" if body is not None else b""

    def json(self) -> Any:
        return self._body


class Adapter:
    """Just what ``KeystoneClient`` asks of a keystoneauth adapter; answers from a script."""

    service_type, interface, region_name, endpoint_override = "placement", "internal", "R1", None

    def __init__(self, *answers: Response | Exception) -> None:
        self.answers, self.asked = list(answers), 0

    def get(self, path: str, **kwargs: Any) -> Response:
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def get_endpoint(self) -> str:
        return "http://placement"


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "WAIT_SECONDS", 0.0)


def client(adapter: Adapter) -> KeystoneClient:
    return KeystoneClient(adapter, "Placement")  # type: ignore[arg-type]


def test_a_service_s_server_error_is_asked_three_times_then_told_as_it_is():
    adapter = Adapter(Response(503, {"errors": [{"detail": "busy"}]}))
    with pytest.raises(ServiceError, match="HTTP 503: busy"):
        get_json(client(adapter), "/resource_providers")
    assert adapter.asked == retry.ATTEMPTS == 3


def test_a_service_that_recovers_is_asked_until_it_answers():
    adapter = Adapter(Response(500, {}), Response(502, {}), Response(200, {"ok": 1}))
    assert get_json(client(adapter), "/resource_providers") == {"ok": 1}
    assert adapter.asked == 3


def test_an_unreachable_service_is_retried_and_a_missing_endpoint_is_not():
    unreachable = Adapter(ks_exc.ConnectFailure("refused"))
    with pytest.raises(ServiceError, match="unreachable"):
        client(unreachable).get("/x")
    assert unreachable.asked == 3
    missing = Adapter(ks_exc.EndpointNotFound("none"))
    with pytest.raises(ServiceError, match="no placement endpoint"):
        client(missing).get("/x")
    assert missing.asked == 1


def test_a_client_error_is_never_retried():
    adapter = Adapter(Response(404, {}))
    with pytest.raises(ServiceError, match="HTTP 404"):
        get_json(client(adapter), "/x")
    assert adapter.asked == 1


class Transport:
    def __init__(self, *statuses: int) -> None:
        self.statuses, self.asked = list(statuses), 0

    def get(self, path: str) -> tuple[int, Any]:
        self.asked += 1
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return status, {"availabilityZoneInfo": []} if status == 200 else {}


def test_nova_s_server_error_is_asked_three_times_by_the_same_layer():
    failing = Transport(503)
    with pytest.raises(NovaError, match="HTTP 503"):
        NovaEndpoints(failing, retry=default_retry()).availability_zones()
    assert failing.asked == 3
    recovering = Transport(500, 502, 200)
    assert NovaEndpoints(recovering, retry=default_retry()).availability_zones() == frozenset()
    assert recovering.asked == 3


def test_keystoneauth_retries_nothing_in_the_adapters_built_from_the_config(tmp_path):
    conf = loading.load(
        [
            write(
                tmp_path / "n.conf",
                "[nova]\nauth_type = admin_token\ntoken = t\nendpoint = http://nova:8774/v2.1\n",
            )
        ]
    )
    adapter = transport_from_conf(conf).adapter
    assert (adapter.connect_retries, adapter.status_code_retries) == (0, 0)


@pytest.mark.parametrize("key", ["connect_retries", "status_code_retries", "connect_retry_delay"])
def test_nova_s_section_refuses_keystoneauth_s_retries(tmp_path, capsys, key):
    conf = write(tmp_path / "n.conf", f"[nova]\n{key} = 2\n")
    assert cli.main(["check-config", "--config-file", conf]) == exits.USAGE
    line = capsys.readouterr().err.strip()
    assert f"[nova] {key} = 2 is not used" in line and "retries" in line
