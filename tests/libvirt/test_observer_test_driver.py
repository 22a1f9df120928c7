"""The libvirt observer against libvirt's in-process test:/// driver."""

from __future__ import annotations

import pathlib
import uuid as uuidlib
from typing import Any

import libvirt
import pytest

from nova_orphans import model
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import errors, hypervisor

NS11 = worlds.NOVA_NS_1_1
NS10 = worlds.NOVA_NS_1_0
RUNNING_UUID = "6f1c6c1e-0b4a-4d55-9d1e-2b9a3f7f0001"
SHUTOFF_UUID = "6f1c6c1e-0b4a-4d55-9d1e-2b9a3f7f0002"
FOREIGN_UUID = "6f1c6c1e-0b4a-4d55-9d1e-2b9a3f7f0003"
GARBAGE_UUID = "6f1c6c1e-0b4a-4d55-9d1e-2b9a3f7f0004"


def _observe(tmp_path: pathlib.Path, *domains: str) -> dict[str, model.Domain]:
    with hypervisor.LibvirtObserver.open(worlds.write_node_file(tmp_path, domains)) as observer:
        return {d.uuid: d for d in observer.look()}


def test_running_nova_domain_is_read_completely(tmp_path: pathlib.Path) -> None:
    domain = worlds.node_domain(
        uuid=RUNNING_UUID,
        name="instance-0000002a",
        metadata=worlds.nova_metadata(name="web-1", flavor="m1.small"),
        devices=[
            worlds.file_disk("/var/lib/nova/instances/x/disk", "vda"),
            worlds.rbd_disk("volumes/volume-1", "vdb"),
            worlds.bridge_interface("fa:16:3e:00:00:2a", "tap2a"),
        ],
    )
    assert _observe(tmp_path, domain)[RUNNING_UUID] == model.Domain(
        uuid=RUNNING_UUID,
        name="instance-0000002a",
        state=model.DomainState.RUNNING,
        persistent=True,
        job_active=False,
        metadata=model.NovaMetadata(
            namespace=NS11,
            display_name="web-1",
            creation_time="2024-05-01 12:00:00",
            project_id="2f6e8b1c0d9a4e7f8c6b5a4d3e2f1a0b",
            user_id="8a1b0c6e5a2d4c1f9a3e0b7d6c5f4e3a",
            flavor="m1.small",
            package="29.0.0",
        ),
        disks=(
            model.Disk("vda", "disk", "file", "/var/lib/nova/instances/x/disk"),
            model.Disk("vdb", "disk", "network", "rbd:volumes/volume-1", "rbd"),
        ),
        interfaces=(model.Interface("bridge", "fa:16:3e:00:00:2a", "tap2a", "br-int"),),
        usage=model.Usage(vcpus=1, memory_bytes=32 * 1024**2),
    )


def test_shut_off_domain_with_old_namespace_metadata_is_read(tmp_path: pathlib.Path) -> None:
    domain = worlds.node_domain(
        uuid=SHUTOFF_UUID,
        name="instance-0000002b",
        state="shut off",
        metadata=worlds.nova_metadata(namespace=NS10, name="old-1"),
    )
    seen = _observe(tmp_path, domain)[SHUTOFF_UUID]
    assert seen.state is model.DomainState.SHUTOFF
    assert not seen.is_active
    assert seen.metadata is not None
    assert (seen.metadata.namespace, seen.metadata.display_name) == (NS10, "old-1")


def test_newer_namespace_wins_when_both_are_present(tmp_path: pathlib.Path) -> None:
    both = worlds.nova_metadata(namespace=NS10, name="old") + worlds.nova_metadata(name="new")
    domain = worlds.node_domain(uuid=RUNNING_UUID, name="both", metadata=both)
    seen = _observe(tmp_path, domain)[RUNNING_UUID]
    assert seen.metadata is not None
    assert (seen.metadata.namespace, seen.metadata.display_name) == (NS11, "new")


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param(None, id="no metadata element at all"),
        pytest.param(
            "<op:note xmlns:op='urn:example:operator'>lab box</op:note>",
            id="only an operator's own metadata",
        ),
    ],
)
def test_domain_without_nova_metadata_is_foreign(
    tmp_path: pathlib.Path, metadata: str | None
) -> None:
    domain = worlds.node_domain(uuid=FOREIGN_UUID, name="operator-test", metadata=metadata)
    seen = _observe(tmp_path, domain)[FOREIGN_UUID]
    assert (seen.metadata, seen.metadata_error) == (None, None)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        pytest.param(
            f"<nova:server xmlns:nova='{NS11}'><nova:name>x</nova:name></nova:server>",
            "root element is <server>, expected <instance>",
            id="wrong root element in the Nova namespace",
        ),
        pytest.param(f"<nova:instance xmlns:nova='{NS11}'/>", "none of the fields", id="empty"),
        pytest.param(
            f"<nova:instance xmlns:nova='{NS11}'><nova:name>a</nova:name>"
            "<nova:name>b</nova:name></nova:instance>",
            "more than one <name>",
            id="duplicate display name",
        ),
    ],
)
def test_garbage_metadata_gives_error_string_not_metadata(
    tmp_path: pathlib.Path, metadata: str, message: str
) -> None:
    domain = worlds.node_domain(uuid=GARBAGE_UUID, name="garbage", metadata=metadata)
    seen = _observe(tmp_path, domain)[GARBAGE_UUID]
    assert seen.metadata is None
    assert seen.metadata_error is not None
    assert message in seen.metadata_error


def test_garbage_metadata_does_not_hide_other_domains(tmp_path: pathlib.Path) -> None:
    seen = _observe(
        tmp_path,
        worlds.node_domain(uuid=GARBAGE_UUID, name="g", metadata=f"<n:x xmlns:n='{NS11}'/>"),
        worlds.node_domain(uuid=RUNNING_UUID, name="ok", metadata=worlds.nova_metadata()),
    )
    assert seen[GARBAGE_UUID].metadata_error is not None
    assert seen[RUNNING_UUID].metadata is not None


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("running", model.DomainState.RUNNING),
        ("paused", model.DomainState.PAUSED),
        ("shut off", model.DomainState.SHUTOFF),
        ("crashed", model.DomainState.CRASHED),
    ],
)
def test_state_is_mapped(tmp_path: pathlib.Path, state: str, expected: model.DomainState) -> None:
    domain = worlds.node_domain(uuid=RUNNING_UUID, name="s", state=state)
    assert _observe(tmp_path, domain)[RUNNING_UUID].state is expected


def test_transient_domain_is_not_persistent(tmp_path: pathlib.Path) -> None:
    seen = _observe(
        tmp_path,
        worlds.node_domain(uuid=RUNNING_UUID, name="t", transient=True),
        worlds.node_domain(uuid=SHUTOFF_UUID, name="p", state="shut off"),
    )
    assert not seen[RUNNING_UUID].persistent
    assert seen[SHUTOFF_UUID].persistent


def test_look_up_reads_the_same_as_the_look(tmp_path: pathlib.Path) -> None:
    uri = worlds.write_node_file(
        tmp_path,
        [
            worlds.node_domain(
                uuid=RUNNING_UUID,
                name="instance-00000001",
                metadata=worlds.nova_metadata(),
                devices=[worlds.ethernet_interface("fa:16:3e:00:00:01", "tap1")],
            )
        ],
    )
    with hypervisor.LibvirtObserver.open(uri) as observer:
        (listed,) = observer.look()
        assert observer.look_up(RUNNING_UUID) == listed
        assert observer.look_up(FOREIGN_UUID) is None


def test_world_without_domains_lists_nothing(tmp_path: pathlib.Path) -> None:
    assert _observe(tmp_path) == {}


def test_five_hundred_domains_are_all_listed_correctly(tmp_path: pathlib.Path) -> None:
    domains = worlds.nova_domains(400) + [
        worlds.node_domain(uuid=str(uuidlib.UUID(int=1000 + i)), name=f"foreign-{i}")
        for i in range(100)
    ]
    seen = _observe(tmp_path, *domains)
    assert len(seen) == 500
    for number in range(1, 401):
        domain = seen[str(uuidlib.UUID(int=number))]
        assert domain.name == worlds.instance_name(number)
        assert domain.metadata is not None
        assert domain.metadata.display_name == f"server-{number}"
        assert domain.disks[0].source == f"/var/lib/nova/instances/{number}/disk"
    assert sum(d.metadata is None for d in seen.values()) == 100


@pytest.mark.parametrize(
    "uri",
    [
        pytest.param("test:///nonexistent/nova-orphans/node.xml", id="missing world file"),
        pytest.param("qemu+tcp://127.0.0.1:1/system", id="nothing listening"),
    ],
)
def test_unreachable_uri_raises_hypervisor_unreachable(uri: str) -> None:
    with pytest.raises(errors.HypervisorUnreachable) as caught:
        hypervisor.LibvirtObserver.open(uri)
    message = str(caught.value)
    assert message.startswith(f"libvirt unreachable at {uri}: ")
    assert "\n" not in message


def test_libvirt_failure_while_listing_raises_hypervisor_error(tmp_path: pathlib.Path) -> None:
    uri = worlds.write_node_file(tmp_path, [worlds.node_domain(uuid=RUNNING_UUID, name="x")])
    observer = hypervisor.LibvirtObserver.open(uri)
    observer.close()  # NOTE: the connection is gone underneath the observer.
    with pytest.raises(errors.HypervisorError, match=f"^libvirt {uri}: "):
        observer.look()


class _VanishingConnection:
    """Undefines one domain right after the bulk listing, as if it went away meanwhile."""

    def __init__(self, conn: Any, victim: str) -> None:
        self._conn = conn
        self._victim = victim

    def getAllDomainStats(self, stats: int, flags: int) -> Any:
        records = self._conn.getAllDomainStats(stats, flags)
        self._conn.lookupByUUIDString(self._victim).undefine()
        return records

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_domain_that_vanishes_while_listing_is_dropped() -> None:
    # NOTE: test:///default is shared by all connections of this process, so a
    # read-write connection can remove a domain the observer has already listed.
    conn = libvirt.open("test:///default")
    kept, victim = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    for uuid in (kept, victim):
        conn.defineXML(worlds.node_domain(uuid=uuid, name=f"vanish-{uuid}"))
    try:
        observer = hypervisor.LibvirtObserver(_VanishingConnection(conn, victim), "test:///default")
        uuids = {d.uuid for d in observer.look()}
        assert kept in uuids
        assert victim not in uuids
        assert observer.look_up(victim) is None
    finally:
        conn.lookupByUUIDString(kept).undefine()
        conn.close()


class _MigratingConnection:
    """Reports every domain as paused for an incoming migration."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def getAllDomainStats(self, stats: int, flags: int) -> Any:
        paused = {
            "state.state": libvirt.VIR_DOMAIN_PAUSED,
            "state.reason": libvirt.VIR_DOMAIN_PAUSED_MIGRATION,
        }
        return [(dom, paused) for dom, _ in self._conn.getAllDomainStats(stats, flags)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_domain_paused_for_migration_has_an_active_job(tmp_path: pathlib.Path) -> None:
    uri = worlds.write_node_file(tmp_path, [worlds.node_domain(uuid=RUNNING_UUID, name="m")])
    conn = libvirt.openReadOnly(uri)
    try:
        (seen,) = hypervisor.LibvirtObserver(_MigratingConnection(conn), uri).look()
    finally:
        conn.close()
    assert seen.job_active
    assert seen.state is model.DomainState.PAUSED
