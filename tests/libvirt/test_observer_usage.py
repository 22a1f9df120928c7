"""What each domain consumes comes from the scan's one bulk libvirt call, not per-domain calls."""

from __future__ import annotations

import collections
import pathlib
from typing import Any

import libvirt

from nova_orphans import model, virt
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import hypervisor

RUNNING = "00000000-0000-4000-8000-0000000000a1"
STOPPED = "00000000-0000-4000-8000-0000000000a2"
#: Per-domain calls the scan makes anyway (docs: one XMLDesc, metadata, jobInfo when active).
SCAN_DOMAIN_CALLS = {"UUIDString", "name", "XMLDesc", "metadata", "jobInfo"}


class _Counting:
    """Counts every call on the connection and on each domain it hands out."""

    def __init__(self, conn: Any, stats: dict[str, dict[str, Any]]) -> None:
        self._conn = conn
        self._stats = stats
        self.calls: collections.Counter[str] = collections.Counter()
        self.domain_calls: collections.Counter[str] = collections.Counter()

    def getAllDomainStats(self, stats: int, flags: int) -> Any:
        self.calls["getAllDomainStats"] += 1
        assert stats == virt.SCAN_STATS
        records = self._conn.getAllDomainStats(stats, flags)
        # NOTE: the test driver answers the state alone; these are what QEMU answers.
        return [
            (_CountingDomain(dom, self.domain_calls), {**rec, **self._stats[dom.UUIDString()]})
            for dom, rec in records
        ]

    def __getattr__(self, name: str) -> Any:
        self.calls[name] += 1
        return getattr(self._conn, name)


class _CountingDomain:
    def __init__(self, dom: Any, calls: collections.Counter[str]) -> None:
        self._dom = dom
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        self._calls[name] += 1
        return getattr(self._dom, name)


QEMU_STATS = {
    RUNNING: {
        "cpu.time": 12_500_000_000,
        "balloon.current": 1048576,  # KiB
        "vcpu.current": 2,
        "block.count": 2,
        "block.0.name": "vda",
        "block.0.physical": 3 * 1024**3,
        "block.0.allocation": 3 * 1024**3 - 4096,
        "block.1.name": "vdb",  # the RBD volume: not this host's storage
        "block.1.physical": 10 * 1024**3,
    },
    STOPPED: {"block.count": 1, "block.0.name": "vda", "block.0.physical": 512 * 1024**2},
}


def _world(tmp_path: pathlib.Path) -> str:
    return worlds.write_node_file(
        tmp_path,
        [
            worlds.node_domain(
                uuid=RUNNING,
                name="running",
                metadata=worlds.nova_metadata(),
                devices=[
                    worlds.file_disk("/var/lib/nova/instances/a1/disk"),
                    worlds.rbd_disk("volumes/volume-1"),
                ],
            ),
            worlds.node_domain(
                uuid=STOPPED,
                name="stopped",
                state="shut off",
                devices=[worlds.file_disk("/var/lib/nova/instances/a2/disk")],
            ),
        ],
    )


def test_usage_comes_from_the_one_bulk_call(tmp_path: pathlib.Path) -> None:
    uri = _world(tmp_path)
    conn = libvirt.openReadOnly(uri)
    counting = _Counting(conn, QEMU_STATS)
    try:
        domains = {d.uuid: d for d in hypervisor.LibvirtObserver(counting, uri).look()}
    finally:
        conn.close()
    assert counting.calls == {"getAllDomainStats": 1, "listAllDomains": 1}
    # No per-domain round trip beyond those the scan always made (no info(),
    # memoryStats(), blockInfo(), getCPUStats()...).
    assert set(counting.domain_calls) <= SCAN_DOMAIN_CALLS
    assert counting.domain_calls["XMLDesc"] == 2
    assert domains[RUNNING].usage == model.Usage(
        vcpus=2, memory_bytes=1024**3, disk_bytes=3 * 1024**3, cpu_seconds=12.5
    )
    # A stopped guest holds no memory and no CPUs; its disk stays.
    assert domains[STOPPED].usage == model.Usage(0, 0, 512 * 1024**2, None)


def test_a_driver_without_these_stats_falls_back_to_the_xml(tmp_path: pathlib.Path) -> None:
    # The test driver answers the state alone: vCPUs and memory come from the XML already
    # read, the disk allocation stays unknown (None), never 0.
    uri = _world(tmp_path)
    with hypervisor.LibvirtObserver.open(uri) as observer:
        domains = {d.uuid: d for d in observer.look()}
    assert domains[RUNNING].usage == model.Usage(
        vcpus=1, memory_bytes=32 * 1024**2, disk_bytes=None, cpu_seconds=None
    )
