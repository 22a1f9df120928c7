"""Benchmark on a real libvirtd: a full read against the agent's steady cycle; the CLI's RSS.

Defines N inactive tiny TCG guests with Nova metadata, a file disk and an interface in
``qemu:///system`` (names ``nova-orphans-bench-*``), starts ``--running`` of them, and
times, in the same run and on the same libvirtd:

- the floor: the two bulk calls every cycle makes (``getAllDomainStats`` and the
  transient listing), nothing per domain;
- a full read (``LibvirtObserver.look()``, what every cycle did before) and the
  bare calls it cannot avoid (one ``XMLDesc`` and one ``metadata`` per domain);
- the agent's steady cycle on its kept view (``LibvirtView``: identity and listing, the
  connection open), with nothing changed and with 1 % of the guests re-tagged between
  cycles, against today's cycle (connect, identity, full read, close).

With ``--rss``, a fresh ``nova-orphans audit`` process against this libvirtd at the
largest size, Nova the simulated one served over loopback HTTP (no modelled latency), and
where its memory goes. Then undefines every benchmark guest. Needs
``.ci/services/libvirtd.sh start`` (no other test or benchmark should be using it meanwhile).

    .venv/bin/python -m benchmarks.bench_libvirtd [--sizes 100 1000] [--running 3] [--rss]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable

import libvirt

from benchmarks.bench_audit import HOST, child_run, serve
from benchmarks.bench_libvirt_observer import floor_calls
from nova_orphans import model, virt
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.observe import hypervisor
from nova_orphans.observe.domain_xml import NOVA_NS_1_1
from nova_orphans.observe.libvirt_view import LibvirtView

URI = "qemu:///system"
PREFIX = "nova-orphans-bench-"
REPEATS = 5
#: One guest in this many is re-tagged between the "1 % changed" cycles.
CHANGED_EVERY = 100


def bench_uuid(n: int) -> str:
    """The UUID of the n-th benchmark guest (far from any random one)."""
    return str(uuidlib.UUID(int=(0xB0 << 120) + n))


def define(conn: libvirt.virConnect, count: int) -> list[libvirt.virDomain]:
    """Define ``count`` inactive Nova-marked guests, each with a disk and an interface."""
    doms = []
    for i in range(count):
        mac = f"fa:16:3e:{i >> 16 & 0xFF:02x}:{i >> 8 & 0xFF:02x}:{i & 0xFF:02x}"
        devices = [
            worlds.file_disk(f"/var/lib/nova/instances/{bench_uuid(i)}/disk"),
            worlds.ethernet_interface(mac, f"tapbench{i:06d}"),
        ]
        xml = worlds.qemu_domain(
            uuid=bench_uuid(i),
            name=f"{PREFIX}{i:06d}",
            metadata=worlds.nova_metadata(name=f"bench-{i}"),
            devices=devices,
        )
        doms.append(conn.defineXML(xml))
    return doms


def start_diskless(conn: libvirt.virConnect, count: int) -> None:
    """Define and start ``count`` running guests (no disk image to need; a tiny TCG guest)."""
    for i in range(count):
        xml = worlds.qemu_domain(
            uuid=bench_uuid(900_000 + i),
            name=f"{PREFIX}run-{i}",
            metadata=worlds.nova_metadata(name=f"bench-run-{i}"),
        )
        conn.defineXML(xml).create()


def undefine_ours(conn: libvirt.virConnect) -> None:
    """Remove every benchmark guest, also ones a crashed earlier run left."""
    for dom in conn.listAllDomains(0):
        if dom.name().startswith(PREFIX):
            if dom.isActive():
                dom.destroy()
            dom.undefine()


def timed(repeats: int, func: Callable[[], object], between: Callable[[], None]) -> list[float]:
    """Seconds of ``repeats`` runs of ``func``, ``between`` run (untimed) before each."""
    times = []
    for _ in range(repeats):
        between()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times


def bulk_calls(conn: libvirt.virConnect) -> int:
    """The floor of any cycle: the bulk listing with its stats and the transient listing."""
    stats = virt.all_domain_stats(conn)
    virt.transient_uuids(conn)
    return len(stats)


def todays_cycle() -> int:
    """Every cycle before the kept view: connect, identity, read every domain, close."""
    with hypervisor.LibvirtObserver.open(URI) as observer:
        observer.identity()
        return len(observer.look())


def view_cycle(view: LibvirtView) -> int:
    with view.session() as session:
        session.identity()
        return len(session.look())


def retag(doms: list[libvirt.virDomain], counter: list[int]) -> Callable[[], None]:
    """Re-tag one guest in ``CHANGED_EVERY`` (a new server name in its Nova metadata)."""

    def change() -> None:
        counter[0] += 1
        element = worlds.nova_metadata(name=f"renamed-{counter[0]}")
        element = element.replace("nova:", "").replace(":nova=", "=")
        for dom in doms[counter[0] % CHANGED_EVERY :: CHANGED_EVERY]:
            dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, element, "nova", NOVA_NS_1_1, 0)
        time.sleep(0.2)  # NOTE: cycles are minutes apart: libvirtd's events are in by then

    return change


def definitions(domains: tuple[model.Domain, ...]) -> list[tuple[object, ...]]:
    """What the view keeps of each domain, and its state (its CPU time moves)."""
    return [(d.uuid, d.name, d.state, d.metadata, d.disks, d.interfaces) for d in domains]


def row(label: str, times: list[float], total: int, full: float) -> str:
    best, median = min(times), statistics.median(times)
    return (
        f"| {label} | {best:.4f} | {median:.4f} | {best / total * 1e6:.0f} | {full / best:.1f}x |"
    )


def bench_size(admin: libvirt.virConnect, size: int, running: int) -> list[str]:
    """Define ``size`` guests (``running`` of them running), time the reads, remove them."""
    started = time.perf_counter()
    doms = define(admin, size)
    start_diskless(admin, running)
    defined = time.perf_counter() - started
    total = len(admin.listAllDomains(0))
    reader = libvirt.openReadOnly(URI)
    view = LibvirtView(URI, libvirt_full_look_every=1_000_000)
    try:
        nothing = lambda: None  # noqa: E731
        floor = timed(REPEATS, functools.partial(bulk_calls, reader), nothing)
        bare = timed(REPEATS, functools.partial(floor_calls, reader), nothing)
        with hypervisor.LibvirtObserver.open(URI) as observer:
            full = timed(REPEATS, observer.look, nothing)
        today = timed(REPEATS, todays_cycle, nothing)
        first = timed(1, functools.partial(view_cycle, view), nothing)
        steady = timed(REPEATS, functools.partial(view_cycle, view), nothing)
        assert view.last_read is not None and not view.last_read.definitions_read
        changed = timed(REPEATS, functools.partial(view_cycle, view), retag(doms, [0]))
        assert view.last_read is not None and not view.last_read.full
        reread = len(view.last_read.definitions_read)
        with view.session() as session:
            assert definitions(session.look()) == definitions(
                hypervisor.LibvirtObserver(reader, URI).look()
            )
    finally:
        view.close()
        reader.close()
    base = min(full)
    return [
        f"\n{size:,} inactive guests + {running} running, {total:,} domains in all "
        f"(defined in {defined:.1f} s); best and median of {REPEATS}, seconds:\n",
        "| libvirt read | best s | median s | µs per domain | full read ÷ this |",
        "|---|---|---|---|---|",
        row("bulk calls alone (the floor of any cycle)", floor, total, base),
        row("bare per-domain calls (`XMLDesc` + `metadata`)", bare, total, base),
        row("full read, `look()` (connection open)", full, total, base),
        row("today's cycle: connect, identity, full read, close", today, total, base),
        row("view, first cycle (connect, watch, full read)", first, total, base),
        row("view, steady cycle, nothing changed", steady, total, base),
        row(f"view, steady cycle, 1 % re-tagged ({reread} XML read)", changed, total, base),
    ]


def bench_rss(size: int, running: int) -> list[str]:
    """A fresh ``nova-orphans audit`` against this libvirtd holding ``size`` guests."""
    admin = libvirt.open(URI)
    try:
        define(admin, size)
        start_diskless(admin, running)
        nova = SimulatedNova()
        nova.add_compute(HOST, node=admin.getHostname(), hypervisor_type="QEMU")
        for i in range(size):
            nova.boot(HOST, uuid=bench_uuid(i))
        for i in range(running):
            nova.boot(HOST, uuid=bench_uuid(900_000 + i))
        for i in range(0, size, CHANGED_EVERY):
            nova.local_delete(bench_uuid(i))  # 1 % deleted: orphans to look up and report
        with tempfile.TemporaryDirectory() as tmp, serve(nova) as endpoint:
            conf = f"{tmp}/bench.conf"
            with open(conf, "w", encoding="utf-8") as out:
                out.write(f"[nova]\nauth_type = none\nendpoint = {endpoint}\n")
            argv = [sys.executable, "-m", "nova_orphans.cli", "audit", "--config-file", conf,
                    "--host", HOST, "--libvirt-uri", URI]  # fmt: skip
            runs = [child_run(argv) for _ in range(3)]
            imports = child_run([sys.executable, "-c", IMPORTS])
    finally:
        undefine_ours(admin)
        admin.close()
    for run in runs:
        if run.code not in (0, 3):
            raise SystemExit(f"audit exited {run.code}: {run.last_line}")
    peaks = [r.peak_mib for r in runs]
    return [
        f"\nPeak RSS of a fresh `nova-orphans audit` ({size:,} + {running} guests on "
        f"{URI}, simulated Nova over loopback HTTP), 3 runs:\n",
        "| process | peak RSS MiB | wall s |",
        "|---|---|---|",
        f"| `nova-orphans audit` | {max(peaks):.1f} (min {min(peaks):.1f}) "
        f"| {statistics.median(r.wall for r in runs):.2f} |",
        f"\nWhere it goes: the high-water mark after each import of the audit, in order "
        f"(MiB):\n\n{imports.stdout}",
    ]


#: Imports what ``audit`` imports, heaviest first, printing the RSS high-water mark after
#: each and, at the end, how much of the resident memory is shared library pages.
IMPORTS = """
import importlib, resource
def hwm():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
last = hwm()
print("| import | adds MiB | high-water MiB |")
print("|---|---|---|")
print(f"| (the Python interpreter) | | {last:.1f} |")
for name in ("libvirt", "oslo_config.cfg", "oslo_log.log", "requests", "keystoneauth1.loading",
             "nova_orphans.observe.hypervisor", "nova_orphans.cli.audit"):
    importlib.import_module(name)
    now = hwm()
    print(f"| `{name}` | {now - last:.1f} | {now:.1f} |")
    last = now
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
anon, files = (int(status[k].split()[0]) / 1024 for k in ("RssAnon", "RssFile"))
print()
print(f"Of it {files:.1f} MiB are file pages (shared libraries), {anon:.1f} MiB private.")
"""


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--running", type=int, default=3)
    parser.add_argument("--rss", action="store_true", help="also the CLI's peak RSS")
    args = parser.parse_args()
    libvirt.registerErrorHandler(virt.ignore_errors, None)
    admin = libvirt.open(URI)
    undefine_ours(admin)
    others = len(admin.listAllDomains(0))
    print(f"libvirt {libvirt.getVersion()} via {URI}; {others} other domains present")
    try:
        for size in args.sizes:
            print("\n".join(bench_size(admin, size, args.running)))
            undefine_ours(admin)
        if args.rss:
            print("\n".join(bench_rss(max(args.sizes), args.running)))
    finally:
        undefine_ours(admin)
        admin.close()


if __name__ == "__main__":
    main()
