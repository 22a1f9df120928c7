"""The identity comparison (docs/design.md rule 10), table-driven: each case is one sentence."""

from __future__ import annotations

import pytest

from nova_orphans.core.identity import (
    Check,
    LibvirtIdentity,
    LocalComputeId,
    NovaNode,
    Outcome,
    State,
    verify,
)

LV_UUID = "71d94ffd-8fab-463e-973f-a02dfa1ce9db"
H1_UUID = "be4f2e22-1b5a-4269-b447-4a9343e016aa"
LVHOST = NovaNode(LV_UUID, "cmp17.example.org", "QEMU", "lvhost")
HOST1 = NovaNode(H1_UUID, "host1", "fake", "host1")
QEMU = LibvirtIdentity("qemu:///system", "cmp17.example.org", "QEMU", "79fa4f91")
OTHER_QEMU = LibvirtIdentity("qemu+tls://cmp18/system", "cmp18.example.org", "QEMU")
TEST = LibvirtIdentity("test:///tmp/w.xml", "cmp17.example.org", "TEST")
NO_ID = LocalComputeId(absent="nova_config_file not set: compute_id not read")


def cid(value: str) -> LocalComputeId:
    return LocalComputeId({"/var/lib/nova/compute_id": value})


CASES = [
    (
        "a libvirt compute read through its own libvirt passes hostname and type",
        "lvhost", [LVHOST], QEMU, NO_ID,
        State.VERIFIED, {Check.HOSTNAME: Outcome.PASSED, Check.TYPE: Outcome.PASSED},
    ),
    (
        "its compute_id naming Nova's node passes as well",
        "lvhost", [LVHOST], QEMU, cid(LV_UUID),
        State.VERIFIED, {Check.COMPUTE_ID: Outcome.PASSED},
    ),
    (
        "a config naming a fake host on a libvirt Nova knows as another host's is a mismatch",
        "host1", [HOST1, LVHOST], QEMU, NO_ID,
        State.MISMATCH, {Check.LIBVIRT_OWNER: Outcome.FAILED, Check.TYPE: Outcome.SKIPPED},
    ),
    (
        "a host whose node is another machine's libvirt is a mismatch on the hostname",
        "lvhost", [LVHOST], OTHER_QEMU, NO_ID,
        State.MISMATCH, {Check.HOSTNAME: Outcome.FAILED, Check.TYPE: Outcome.PASSED},
    ),
    (
        "a host Nova has no compute node for is a mismatch",
        "compute-99", [LVHOST], QEMU, NO_ID,
        State.MISMATCH, {Check.NOVA_NODE: Outcome.FAILED, Check.HOSTNAME: Outcome.SKIPPED},
    ),
    (
        "a libvirt compute read through libvirt's test driver is a mismatch on the type",
        "lvhost", [LVHOST], TEST, NO_ID,
        State.MISMATCH, {Check.TYPE: Outcome.FAILED},
    ),
    (
        "a compute_id naming another node is a mismatch even when hostname and type agree",
        "lvhost", [LVHOST], QEMU, cid(H1_UUID),
        State.MISMATCH, {Check.HOSTNAME: Outcome.PASSED, Check.COMPUTE_ID: Outcome.FAILED},
    ),
    (
        "two compute_id files that disagree are a mismatch",
        "lvhost", [LVHOST], QEMU,
        LocalComputeId({"/etc/nova/compute_id": LV_UUID, "/var/lib/nova/compute_id": H1_UUID}),
        State.MISMATCH, {Check.COMPUTE_ID: Outcome.FAILED},
    ),
    (
        "a fake node read through the test driver skips hostname and type and stays unproven",
        "host1", [HOST1], TEST, NO_ID,
        State.UNPROVEN,
        {Check.HOSTNAME: Outcome.SKIPPED, Check.TYPE: Outcome.SKIPPED,
         Check.COMPUTE_ID: Outcome.SKIPPED},
    ),
    (
        "a fake node read through the test driver is verified by its compute_id alone",
        "host1", [HOST1], TEST, cid(H1_UUID),
        State.VERIFIED, {Check.HOSTNAME: Outcome.SKIPPED, Check.COMPUTE_ID: Outcome.PASSED},
    ),
    (
        "a fake node played by a libvirt no other host claims is verified by its compute_id",
        "host1", [HOST1], OTHER_QEMU, cid(H1_UUID),
        State.VERIFIED, {Check.TYPE: Outcome.SKIPPED, Check.COMPUTE_ID: Outcome.PASSED},
    ),
    (
        "a fake node played by a libvirt no other host claims, without compute_id, is unproven",
        "host1", [HOST1], OTHER_QEMU, NO_ID,
        State.UNPROVEN, {Check.LIBVIRT_OWNER: Outcome.PASSED, Check.TYPE: Outcome.SKIPPED},
    ),
    (
        "a non-libvirt node other than Nova's fake driver is a mismatch on the type",
        "bm-1", [NovaNode(H1_UUID, "bm-1", "ironic", "bm-1")], OTHER_QEMU, cid(H1_UUID),
        State.MISMATCH, {Check.TYPE: Outcome.FAILED, Check.COMPUTE_ID: Outcome.PASSED},
    ),
    (
        "the same hostname with another type is not a claim by that host",
        "host1", [HOST1, NovaNode(LV_UUID, "cmp17.example.org", "QEMU", "lvhost")], TEST,
        cid(H1_UUID),
        State.VERIFIED, {Check.LIBVIRT_OWNER: Outcome.PASSED},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("host", "nodes", "libvirt", "compute_id", "state", "outcomes"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_verdict(host, nodes, libvirt, compute_id, state, outcomes):
    verdict = verify(host, nodes, libvirt, compute_id)
    assert verdict.state is state, verdict.reason
    found = {r.check: r.outcome for r in verdict.results}
    for check, outcome in outcomes.items():
        assert found[check] is outcome, (check, verdict.results)
    assert "\n" not in verdict.reason
    assert verdict.reason.startswith(
        f"identity {'not proven' if state is State.UNPROVEN else state.value}"
    )


def test_a_mismatch_names_both_identities_on_one_line():
    verdict = verify("host1", [HOST1, LVHOST], QEMU, NO_ID)
    assert (verdict.libvirt, verdict.nodes) == (QEMU, (HOST1,))
    assert verdict.reason.startswith(
        "identity mismatch: Nova's host 'host1' is node 'host1' (fake) but libvirt "
        "qemu:///system is 'cmp17.example.org' (QEMU), which Nova knows as the node of "
        "host 'lvhost'"
    ), verdict.reason


def test_skipped_checks_say_why():
    verdict = verify("host1", [HOST1], TEST, NO_ID)
    skipped = {r.check: r.detail for r in verdict.results if r.outcome is Outcome.SKIPPED}
    assert "Nova's node is its 'fake' driver" in skipped[Check.HOSTNAME]
    assert skipped[Check.COMPUTE_ID] == NO_ID.absent
    assert "no check tied them" in verdict.reason
    assert not verdict.verified


def test_no_node_at_all_never_verifies_whatever_the_compute_id_says():
    verdict = verify("host1", [], TEST, cid(H1_UUID))
    assert verdict.state is State.MISMATCH
    assert "Nova has no compute node for host 'host1'" in verdict.reason
