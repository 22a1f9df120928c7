"""Benchmark against a real libvirtd: list_domains() through the daemon vs the bare calls.

Defines N inactive tiny TCG guests with Nova metadata in ``qemu:///system``
(names ``nova-orphans-bench-*``; nothing is started), times, in the same run
and on the same read-only connection, ``LibvirtObserver.list_domains()`` and the
floor of bare libvirt calls it cannot avoid, then undefines them. Needs
``.ci/services/libvirtd.sh start``.

    .venv/bin/python -m benchmarks.bench_libvirtd [--sizes 10 100 1000]
"""

from __future__ import annotations

import argparse
import functools
import time

import libvirt

from benchmarks.bench_libvirt_observer import best_of, floor_calls
from nova_orphans import virt
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import hypervisor

URI = "qemu:///system"
PREFIX = "nova-orphans-bench-"


def define(conn: libvirt.virConnect, count: int) -> list[libvirt.virDomain]:
    """Define ``count`` inactive Nova-marked guests; returns them."""
    return [
        conn.defineXML(
            worlds.qemu_domain(
                uuid=worlds.random_uuid(),
                name=f"{PREFIX}{i:06d}",
                metadata=worlds.nova_metadata(name=f"bench-{i}"),
            )
        )
        for i in range(count)
    ]


def undefine_ours(conn: libvirt.virConnect) -> None:
    """Remove every benchmark guest, also ones a crashed earlier run left."""
    for dom in conn.listAllDomains(0):
        if dom.name().startswith(PREFIX):
            dom.undefine()


def main() -> None:
    """Print a table: per-domain µs through the daemon, ours vs floor."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    libvirt.registerErrorHandler(virt.ignore_errors, None)
    admin = libvirt.open(URI)
    undefine_ours(admin)
    others = len(admin.listAllDomains(0))
    print(f"libvirt {libvirt.getVersion()} via {URI}; {others} other domains present")
    print(
        f"{'domains':>8} {'define s':>9} {'ours s':>8} {'floor s':>8} "
        f"{'ours µs/dom':>12} {'floor µs/dom':>13} {'ratio':>6}"
    )
    try:
        for size in args.sizes:
            started = time.perf_counter()
            define(admin, size)
            defined = time.perf_counter() - started
            with hypervisor.LibvirtObserver.open(URI) as observer:
                ours, seen = best_of(3, lambda: len(observer.list_domains()))
            reader = libvirt.openReadOnly(URI)
            floor, _ = best_of(3, functools.partial(floor_calls, reader))
            reader.close()
            total = size + others
            assert seen == total, (seen, total)
            print(
                f"{size:>8} {defined:>9.2f} {ours:>8.3f} {floor:>8.3f} "
                f"{ours / total * 1e6:>12.1f} {floor / total * 1e6:>13.1f} "
                f"{ours / floor:>6.2f}"
            )
            undefine_ours(admin)
    finally:
        undefine_ours(admin)
        admin.close()


if __name__ == "__main__":
    main()
