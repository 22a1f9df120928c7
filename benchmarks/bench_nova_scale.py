"""Calibration: what Nova's answers cost as the cloud grows, on the real Nova API.

The costs the model of ``nova_costs.json`` lacked (issue 19), measured against the Nova of
``tests/e2e/stack``, each request asked ``--repeat`` times and its median taken, on both sides
(the client's wait, and nova-api's own time from its request log):

- ``os-services`` (``?binary=nova-compute``, and ``&host=H``) and
  ``os-hypervisors/detail?hypervisor_hostname_pattern=H`` against the number of compute
  services and nodes: extra rows are registered in cell1's database for the measurement
  (copies of ``host1``'s service and node rows under the host names
  ``nova-orphans-calib-N``, inserted with SQL through the stack's MariaDB socket) and deleted
  again right after, on failure too;
- ``changes-since`` listings (the whole cloud's, plain; a host's, detail) against the number
  of servers changed since (servers' ``updated_at`` set to now in the cell database, which is
  what Nova's filter compares);
- the host-filtered plain listing against the host's servers; the ``uuid``-filtered
  changes question a steady cycle asks per orphan whose server is elsewhere;
- a lookup by UUID (and ``GET /servers/{id}``) of a server in cell1 and of one in cell2;
- ``os-migrations?host=H`` (with and without ``changes-since``).

It holds the e2e session lock while its servers and rows exist, creates its servers on the
fake-driver computes (``host1``, ``host2``, ``host3`` in cell2) and deletes them at the end.
Run from the repository root, with the stack up and no other benchmark using it::

    .venv/bin/python -m benchmarks.bench_nova_scale --write
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import sys
import time
from typing import Any

from benchmarks.bench_real_nova import (
    PROJECT,
    TOKEN,
    RequestLog,
    SessionTransport,
    archive,
    create_servers,
    e2e_session_lock,
    machine,
    nova_version,
    raise_quotas,
    remove_everything,
    say,
)
from benchmarks.nova_costs import DEFAULT_PATH, records_in

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "e2e" / "stack"))

import harness

CALIB = "nova-orphans-calib-"
EPOCH = "1970-01-01T00%3A00%3A00Z"


def isotime(when: datetime.datetime) -> str:
    """``when`` as the query takes it."""
    return when.strftime("%Y-%m-%dT%H%%3A%M%%3A%SZ")


class Meter:
    """Asks one path ``repeat`` times; the medians of the client's and nova-api's seconds."""

    def __init__(self, nova: harness.Nova, repeat: int) -> None:
        self.transport = SessionTransport(nova)
        self.log = RequestLog()
        self.repeat = repeat

    def __call__(self, path: str) -> dict[str, Any]:
        mark = self.log.mark()
        client, records = [], 0
        for _ in range(self.repeat):
            start = time.perf_counter()
            status, body = self.transport.get(path)
            client.append(time.perf_counter() - start)
            if status != 200:
                raise harness.StackError(f"GET {path} -> {status}")
            records = records_in(body)
        logged = [r.seconds for r in self.log.since(mark, self.repeat)]
        return {
            "records": records,
            "client_ms": round(statistics.median(client) * 1e3, 2),
            "server_ms": round(statistics.median(logged) * 1e3, 2) if logged else None,
        }


def register_rows(count: int) -> None:
    """``count`` extra compute services and nodes in cell1, copies of host1's rows."""
    remove_rows()
    if count == 0:
        return
    harness.cell_sql(
        "INSERT INTO services (created_at, updated_at, host, `binary`, topic, report_count, "
        "disabled, deleted, forced_down, version, uuid) "
        f"SELECT UTC_TIMESTAMP(), UTC_TIMESTAMP(), CONCAT('{CALIB}', seq), `binary`, topic, 1, "
        "0, 0, 0, version, UUID() "
        f"FROM services, seq_1_to_{count} WHERE host='host1' AND `binary`='nova-compute'"
    )
    columns = (
        "vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, local_gb_used, "
        "hypervisor_type, hypervisor_version, cpu_info, disk_available_least, free_ram_mb, "
        "free_disk_gb, current_workload, running_vms, deleted, host_ip, supported_instances, "
        "pci_stats, metrics, extra_resources, stats, numa_topology, ram_allocation_ratio, "
        "cpu_allocation_ratio, disk_allocation_ratio, mapped"
    )
    harness.cell_sql(
        f"INSERT INTO compute_nodes (created_at, updated_at, service_id, host, "
        f"hypervisor_hostname, uuid, {columns}) "
        "SELECT UTC_TIMESTAMP(), UTC_TIMESTAMP(), s.id, s.host, s.host, UUID(), "
        + ", ".join(f"c.{c.strip()}" for c in columns.split(","))
        + " "
        "FROM compute_nodes c, services s "
        f"WHERE c.hypervisor_hostname='host1' AND c.deleted=0 AND s.host LIKE '{CALIB}%'"
    )


def remove_rows() -> None:
    """Delete every row ``register_rows`` inserted."""
    harness.cell_sql(f"DELETE FROM compute_nodes WHERE host LIKE '{CALIB}%'")
    harness.cell_sql(f"DELETE FROM services WHERE host LIKE '{CALIB}%'")


def touch(uuids: list[str]) -> datetime.datetime:
    """Set the servers' ``updated_at`` to now (what any change does); returns the time before."""
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    before -= datetime.timedelta(seconds=2)
    if uuids:
        if not all(c in "0123456789abcdef-" for u in uuids for c in u):
            raise ValueError("not UUIDs")
        listed = ",".join(f"'{u}'" for u in uuids)
        harness.cell_sql(
            f"UPDATE instances SET updated_at=UTC_TIMESTAMP() WHERE uuid IN ({listed})"
        )
    return before


def measure(args: argparse.Namespace, nova: harness.Nova) -> dict[str, Any]:
    """Every measurement; see the module docstring."""
    meter = Meter(nova, args.repeat)
    out: dict[str, Any] = {}
    say(f"creating {args.here} servers on host1, {args.elsewhere} on host2, {args.cell2} on host3")
    here = create_servers(nova, "host1", args.here, "scale-here", 100)
    elsewhere = create_servers(nova, "host2", args.elsewhere, "scale-else", 100)
    cell2 = create_servers(nova, "host3", args.cell2, "scale-cell2", 100)
    total = len(here) + len(elsewhere) + len(cell2)
    out["servers"] = {"host1": len(here), "host2": len(elsewhere), "host3 (cell2)": len(cell2)}
    time.sleep(3)  # NOTE: the builds' last row updates, before anything is dated
    say("host listings, uuid questions, lookups, migrations")
    out["host_listing"] = {
        f"host1 ({len(here)} servers)": meter("/servers?all_tenants=1&host=host1&limit=1000"),
        f"host2 ({len(elsewhere)} servers)": meter("/servers?all_tenants=1&host=host2&limit=1000"),
    }
    quiet = isotime(touch([]))
    out["uuid_changes_question"] = {
        "unchanged": meter(f"/servers?all_tenants=1&uuid={elsewhere[0]}&changes-since={quiet}"),
    }
    out["lookup"] = {
        "cell1, by uuid filter": meter(
            f"/servers/detail?all_tenants=1&uuid={here[0]}&changes-since={EPOCH}"
        ),
        "cell2, by uuid filter": meter(
            f"/servers/detail?all_tenants=1&uuid={cell2[0]}&changes-since={EPOCH}"
        ),
        "cell1, GET /servers/{id}": meter(f"/servers/{here[0]}"),
        "cell2, GET /servers/{id}": meter(f"/servers/{cell2[0]}"),
    }
    out["os_migrations_by_host"] = {
        "host=host1": meter("/os-migrations?host=host1&limit=1000"),
        "host=host1&changes-since": meter(
            f"/os-migrations?host=host1&changes-since={quiet}&limit=1000"
        ),
    }
    say("changes-since listings against the servers changed")
    changes: dict[str, Any] = {}
    for count in args.changed:
        since = isotime(touch(elsewhere[:count]))
        changes[str(count)] = {
            "cloud, plain": meter(f"/servers?all_tenants=1&changes-since={since}&limit=1000"),
            "host2, detail": meter(
                f"/servers/detail?all_tenants=1&host=host2&changes-since={since}&limit=1000"
            ),
            "host1, detail (none changed)": meter(
                f"/servers/detail?all_tenants=1&host=host1&changes-since={since}&limit=1000"
            ),
            "uuid question (changed)": meter(
                f"/servers?all_tenants=1&uuid={elsewhere[0]}&changes-since={since}"
            )
            if count
            else None,
        }
        time.sleep(1.1)
    out["changes_since"] = {"cloud_servers": total, "by_changed": changes}
    print(json.dumps(out, indent=2), flush=True)
    say("services and nodes against their number")
    meter = Meter(nova, args.rows_repeat)
    rows: dict[str, Any] = {}
    try:
        for count in args.rows:
            register_rows(count)
            computes = int(harness.cell_sql(
                "SELECT COUNT(*) FROM services WHERE `binary`='nova-compute' AND deleted=0"
            ).strip()) + 1  # fmt: skip
            found: dict[str, Any] = {"compute services (both cells)": computes}
            rows[str(count)] = found
            for path in (
                "/os-services?binary=nova-compute&host=host1",
                "/os-services?binary=nova-compute",
                "/os-hypervisors/detail?hypervisor_hostname_pattern=host1",
            ):
                try:
                    found[path.removeprefix("/")] = meter(path)
                except Exception as exc:
                    # NOTE: e.g. gunicorn's worker timeout killing a request that reads
                    # every service: recorded, the next measurement goes on.
                    found[path.removeprefix("/")] = {"error": str(exc)[:300]}
            say(f"  {count} extra rows: {json.dumps(found)}")
    finally:
        remove_rows()
    out["services_and_nodes"] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--here", type=int, default=50)
    parser.add_argument("--elsewhere", type=int, default=200)
    parser.add_argument("--cell2", type=int, default=10)
    parser.add_argument("--changed", type=int, nargs="+", default=[0, 10, 50, 200])
    parser.add_argument("--rows", type=int, nargs="+", default=[0, 1000, 4000, 10000])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rows-repeat", type=int, default=3, help="repeats per service count")
    parser.add_argument("--lock-wait", type=float, default=900)
    parser.add_argument("--write", action="store_true", help=f"add to {DEFAULT_PATH.name}")
    args = parser.parse_args()
    nova = harness.Nova(token=TOKEN)
    with e2e_session_lock(args.lock_wait):
        restore_quotas = raise_quotas(nova)
        try:
            remove_everything(nova)
            archive()
            found = measure(args, nova)
        finally:
            remove_rows()
            remove_everything(nova)
            archive()
            restore_quotas()
    found = {
        "date": datetime.date.today().isoformat(),
        "nova": nova_version(),
        "machine": machine(),
        "how": (
            f"benchmarks/bench_nova_scale.py (project {PROJECT}): medians of {args.repeat} "
            f"requests each ({args.rows_repeat} per service count), client wait and nova-api's "
            "logged time; extra compute service and "
            f"node rows inserted in cell1's database as copies of host1's ({CALIB}N) and "
            "deleted after; changed servers' updated_at set to now in the cell database"
        ),
        **found,
    }
    print(json.dumps(found, indent=2))
    if args.write:
        costs = json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))
        costs["scale"] = found
        DEFAULT_PATH.write_text(json.dumps(costs, indent=2) + "\n", encoding="utf-8")
        say(f"wrote {DEFAULT_PATH}")


if __name__ == "__main__":
    main()
