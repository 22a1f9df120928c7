"""Micro-benchmark: LibvirtObserver.look() against the bare libvirt calls.

Builds test:/// worlds of Nova-marked domains and times, in the same run and
on the same connection, (a) ``look()`` and (b) the floor: one
``listAllDomains`` plus, per domain, the ``metadata`` and ``XMLDesc`` calls
with no parsing. Prints per-domain microseconds, the ratio ours/floor, and
peak RSS after the 1,000 and 10,000 worlds.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_libvirt_observer [--sizes 10 100 1000 10000]
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import tempfile
import time
import tracemalloc
from collections.abc import Callable

import libvirt

from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import domain_xml, hypervisor

DEFAULT_SIZES = (10, 100, 1_000, 10_000)
RSS_AFTER = (1_000, 10_000)


def floor_calls(conn: libvirt.virConnect) -> int:
    """The libvirt calls look() cannot avoid, with no parsing at all."""
    doms = conn.listAllDomains(0)
    for dom in doms:
        dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, domain_xml.NOVA_NS_1_1)
        dom.XMLDesc(0)
    return len(doms)


def best_of(repeats: int, func: Callable[[], int]) -> tuple[float, int]:
    """The fastest of ``repeats`` runs, in seconds, and what the function returned."""
    best, result = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def heap_mib(observer: hypervisor.LibvirtObserver) -> tuple[float, float]:
    """Python heap held by one look() result, and the peak while building it."""
    tracemalloc.start()
    try:
        result = observer.look()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return held / 2**20, peak / 2**20


def bench_size(size: int, directory: pathlib.Path) -> tuple[float, float, float, str]:
    """Seconds for opening the world, look() and the floor; a memory note."""
    uri = worlds.write_node_file(directory, worlds.nova_domains(size), name=f"node-{size}.xml")
    repeats = 5 if size <= 1_000 else 2
    start = time.perf_counter()
    observer = hypervisor.LibvirtObserver.open(uri)
    opened = time.perf_counter() - start
    conn = libvirt.openReadOnly(uri)
    try:
        ours, listed = best_of(repeats, lambda: len(observer.look()))
        floor, counted = best_of(repeats, lambda: floor_calls(conn))
        memory = ""
        if size in RSS_AFTER:
            held, peak = heap_mib(observer)
            memory = (
                f"after {size:,} domains: peak RSS {peak_rss_mib():.1f} MiB (includes two"
                f" test-driver copies of the world); look() result holds {held:.1f} MiB"
                f" of Python heap, {peak:.1f} MiB at peak"
            )
    finally:
        conn.close()
        observer.close()
    if listed != size or counted != size:
        raise SystemExit(f"world of {size}: observer saw {listed}, floor saw {counted}")
    return opened, ours, floor, memory


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    args = parser.parse_args()
    print(f"libvirt {libvirt.getVersion()}, test:/// driver, best of 5 (2 for >1,000)")
    header = f"{'domains':>8} {'open s':>8} {'ours s':>8} {'floor s':>8}"
    print(f"{header} {'ours µs/dom':>12} {'floor µs/dom':>13} {'ratio':>6}")
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            opened, ours, floor, memory = bench_size(size, pathlib.Path(tmp))
            print(
                f"{size:>8} {opened:>8.3f} {ours:>8.3f} {floor:>8.3f} "
                f"{ours / size * 1e6:>12.1f} {floor / size * 1e6:>13.1f} {ours / floor:>6.2f}"
            )
            if memory:
                notes.append(memory)
    print("\n".join(notes))


if __name__ == "__main__":
    main()
