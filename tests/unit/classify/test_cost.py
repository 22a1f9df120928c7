"""What non-managed guests cost, beside Placement's view of the host (``classify/cost.py``)."""

from __future__ import annotations

from nova_orphans.classify import cost
from nova_orphans.classify.cost import PlacementAnswer, ProviderView, Resource
from nova_orphans.model import Domain, DomainState, Finding, Kind, Usage

GIB = 1024**3


def guest(kind: Kind, usage: Usage, n: int = 1) -> Finding:
    uuid = f"00000000-0000-4000-8000-{n:012d}"
    domain = Domain(uuid, f"d{n}", DomainState.RUNNING, True, False, usage=usage)
    return Finding(uuid, f"d{n}", kind, "why", domain, None)


def test_untracked_sums_the_guests_placement_does_not_count():
    findings = [
        guest(Kind.DELETED, Usage(2, 4 * GIB, 10 * GIB, 5.0), 1),
        guest(Kind.UNKNOWN, Usage(1, 2 * GIB, 1 * GIB, 1.0), 2),
        guest(Kind.MISPLACED, Usage(0, 0, 3 * GIB), 3),  # a stopped duplicate: disk only
        guest(Kind.FOREIGN, Usage(4, 6 * GIB, 0), 4),
        # Nova still accounts for these: never counted as untracked.
        guest(Kind.PROTECTED, Usage(8, 16 * GIB, 100 * GIB), 5),
        Finding("00000000-0000-4000-8000-000000000006", "lost", Kind.LOST, "", None, None),
    ]
    assert cost.untracked(findings) == cost.Untracked(
        guests=4, vcpus=7, memory_bytes=12 * GIB, disk_bytes=14 * GIB
    )


def test_a_number_libvirt_did_not_give_makes_the_sum_a_lower_bound_and_says_whose():
    unmeasured = guest(Kind.DELETED, Usage(2, 4 * GIB, None), 1)
    total = cost.untracked([unmeasured, guest(Kind.DELETED, Usage(1, GIB, GIB), 2)])
    assert (total.vcpus, total.disk_bytes, total.unmeasured) == (3, GIB, (unmeasured.uuid,))
    assert total.incomplete == ("disk_bytes",)
    (memory, _, disk) = cost.comparison(total, provider(1024))
    assert memory.endswith("another 5.0 GiB it does not know about")
    assert disk.endswith(
        "another at least 1.0 GiB (libvirt did not measure every guest) it does not know about"
    )


def provider(used_mb: int) -> PlacementAnswer:
    return PlacementAnswer(
        ProviderView(
            "cmp-1.example",
            "rp-uuid",
            {
                "MEMORY_MB": Resource(65536 + 512, 512, 1.0, used_mb),
                "VCPU": Resource(16, 0, 4.0, 20),
                "DISK_GB": Resource(1000, 0, 1.0, 200),
            },
        )
    )


def test_the_comparison_says_what_placement_counts_and_what_it_does_not_know():
    total = cost.Untracked(guests=3, vcpus=6, memory_bytes=12 * GIB, disk_bytes=40 * GIB)
    assert cost.comparison(total, provider(40 * 1024)) == [
        "memory: Placement counts 40.0 GiB of 64.0 GiB used; non-managed guests use another "
        "12.0 GiB it does not know about",
        "vCPUs: Placement counts 20 of 64 used; non-managed guests use another 6 it does not "
        "know about",
        "disk: Placement counts 200.0 GiB of 1000.0 GiB used; non-managed guests use another "
        "40.0 GiB it does not know about",
    ]


def test_placement_not_answering_is_said_never_read_as_nothing_used():
    answer = PlacementAnswer(error="Placement unreachable: timed out")
    assert cost.comparison(cost.Untracked(), answer) == [
        "Placement not consulted: Placement unreachable: timed out"
    ]
