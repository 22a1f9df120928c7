"""The identity comparison (docs/design.md rule 10), table-driven: each case is one sentence."""

from __future__ import annotations

import pytest

from nova_orphans.classify.identity import (
    Check,
    CheckStatus,
    LibvirtIdentity,
    LocalComputeId,
    NovaNode,
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
NO_ID = LocalComputeId(absent="no compute_id file in /var/lib/nova")
BAD_ID = LocalComputeId(unusable=("/var/lib/nova/compute_id does not hold a UUID",))


def cid(value: str) -> LocalComputeId:
    return LocalComputeId({"/var/lib/nova/compute_id": value})


CASES = [
    (
        "a libvirt compute read through its own libvirt passes hostname and type, "
        "but names are no proof: another cloud's compute has the same; unproven",
        "lvhost", [LVHOST], QEMU, NO_ID,
        State.UNPROVEN,
        {Check.HOSTNAME: CheckStatus.PASSED, Check.TYPE: CheckStatus.PASSED,
         Check.COMPUTE_ID: CheckStatus.SKIPPED, Check.NODE_UUID: CheckStatus.SKIPPED},
    ),
    (
        "the node UUID the operator pinned, Nova's node, proves it",
        "lvhost", [LVHOST], QEMU, NO_ID, LV_UUID,
        State.VERIFIED,
        {Check.NODE_UUID: CheckStatus.PASSED, Check.COMPUTE_ID: CheckStatus.SKIPPED},
    ),
    (
        "a pinned node UUID that is not Nova's node of the host is a mismatch "
        "(a wrong cloud or region with same-named computes)",
        "lvhost", [LVHOST], QEMU, NO_ID, H1_UUID,
        State.MISMATCH, {Check.HOSTNAME: CheckStatus.PASSED, Check.NODE_UUID: CheckStatus.FAILED},
    ),
    (
        "the pin and the compute_id must both name the node",
        "lvhost", [LVHOST], QEMU, cid(H1_UUID), LV_UUID,
        State.MISMATCH, {Check.NODE_UUID: CheckStatus.PASSED, Check.COMPUTE_ID: CheckStatus.FAILED},
    ),
    (
        "a compute_id that cannot be trusted leaves the view unproven, even with a right pin",
        "lvhost", [LVHOST], QEMU, BAD_ID, LV_UUID,
        State.UNPROVEN,
        {Check.NODE_UUID: CheckStatus.PASSED, Check.COMPUTE_ID: CheckStatus.INCONCLUSIVE},
    ),
    (
        "its compute_id naming Nova's node passes as well",
        "lvhost", [LVHOST], QEMU, cid(LV_UUID),
        State.VERIFIED, {Check.COMPUTE_ID: CheckStatus.PASSED},
    ),
    (
        "a config naming a fake host on a libvirt Nova knows as another host's is a mismatch",
        "host1", [HOST1, LVHOST], QEMU, NO_ID,
        State.MISMATCH, {Check.LIBVIRT_OWNER: CheckStatus.FAILED, Check.TYPE: CheckStatus.SKIPPED},
    ),
    (
        "a host whose node is another machine's libvirt is a mismatch on the hostname",
        "lvhost", [LVHOST], OTHER_QEMU, NO_ID,
        State.MISMATCH, {Check.HOSTNAME: CheckStatus.FAILED, Check.TYPE: CheckStatus.PASSED},
    ),
    (
        "a host Nova has no compute node for is a mismatch",
        "compute-99", [LVHOST], QEMU, NO_ID,
        State.MISMATCH, {Check.NOVA_NODE: CheckStatus.FAILED, Check.HOSTNAME: CheckStatus.SKIPPED},
    ),
    (
        "a libvirt compute read through libvirt's test driver is a mismatch on the type",
        "lvhost", [LVHOST], TEST, NO_ID,
        State.MISMATCH, {Check.TYPE: CheckStatus.FAILED},
    ),
    (
        "a compute_id naming another node is a mismatch even when hostname and type agree",
        "lvhost", [LVHOST], QEMU, cid(H1_UUID),
        State.MISMATCH, {Check.HOSTNAME: CheckStatus.PASSED, Check.COMPUTE_ID: CheckStatus.FAILED},
    ),
    (
        "two compute_id files that disagree leave the view unproven",
        "lvhost", [LVHOST], QEMU,
        LocalComputeId({"/etc/nova/compute_id": LV_UUID, "/var/lib/nova/compute_id": H1_UUID}),
        State.UNPROVEN, {Check.COMPUTE_ID: CheckStatus.INCONCLUSIVE},
    ),
    (
        "a fake node read through the test driver skips hostname and type and stays unproven",
        "host1", [HOST1], TEST, NO_ID,
        State.UNPROVEN,
        {Check.HOSTNAME: CheckStatus.SKIPPED, Check.TYPE: CheckStatus.SKIPPED,
         Check.COMPUTE_ID: CheckStatus.SKIPPED},
    ),
    (
        "a fake node read through the test driver is verified by its compute_id alone",
        "host1", [HOST1], TEST, cid(H1_UUID),
        State.VERIFIED, {Check.HOSTNAME: CheckStatus.SKIPPED, Check.COMPUTE_ID: CheckStatus.PASSED},
    ),
    (
        "a fake node played by a libvirt no other host claims is verified by its compute_id",
        "host1", [HOST1], OTHER_QEMU, cid(H1_UUID),
        State.VERIFIED, {Check.TYPE: CheckStatus.SKIPPED, Check.COMPUTE_ID: CheckStatus.PASSED},
    ),
    (
        "a fake node played by a libvirt no other host claims, without compute_id, is unproven",
        "host1", [HOST1], OTHER_QEMU, NO_ID,
        State.UNPROVEN, {Check.LIBVIRT_OWNER: CheckStatus.PASSED, Check.TYPE: CheckStatus.SKIPPED},
    ),
    (
        "a non-libvirt node other than Nova's fake driver is a mismatch on the type",
        "bm-1", [NovaNode(H1_UUID, "bm-1", "ironic", "bm-1")], OTHER_QEMU, cid(H1_UUID),
        State.MISMATCH, {Check.TYPE: CheckStatus.FAILED, Check.COMPUTE_ID: CheckStatus.PASSED},
    ),
    (
        "the same hostname with another type is not a claim by that host",
        "host1", [HOST1, NovaNode(LV_UUID, "cmp17.example.org", "QEMU", "lvhost")], TEST,
        cid(H1_UUID),
        State.VERIFIED, {Check.LIBVIRT_OWNER: CheckStatus.PASSED},
    ),
]  # fmt: skip


def _case(name: str, host, nodes, libvirt, compute_id, *rest):
    """A case's parameters; the pinned node UUID (after compute_id) is optional."""
    pinned = rest[0] if len(rest) == 3 else None
    return pytest.param(host, nodes, libvirt, compute_id, pinned, *rest[-2:], id=name)


@pytest.mark.parametrize(
    ("host", "nodes", "libvirt", "compute_id", "pinned", "state", "outcomes"),
    [_case(*c) for c in CASES],
)
def test_verdict(host, nodes, libvirt, compute_id, pinned, state, outcomes):
    verdict = verify(host, nodes, libvirt, compute_id, pinned)
    assert verdict.state is state, verdict.reason
    found = {r.check: r.status for r in verdict.results}
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
    skipped = {r.check: r.detail for r in verdict.results if r.status is CheckStatus.SKIPPED}
    assert "Nova's node is its 'fake' driver" in skipped[Check.HOSTNAME]
    assert skipped[Check.COMPUTE_ID] == NO_ID.absent
    assert "no compute_id or compute_node_uuid tied them" in verdict.reason


def test_an_unproven_view_says_names_are_no_proof_and_what_was_missing():
    verdict = verify("lvhost", [LVHOST], QEMU, NO_ID)
    assert verdict.reason.endswith(
        "; no compute_id or compute_node_uuid tied them (passed: hostname, type (names are no "
        "proof); skipped: compute-id: no compute_id file in /var/lib/nova; node-uuid: no "
        "compute_node_uuid configured)"
    ), verdict.reason


def test_an_untrusted_compute_id_is_named_in_the_reason():
    verdict = verify("lvhost", [LVHOST], QEMU, BAD_ID, LV_UUID)
    assert verdict.reason.endswith(
        "; a compute_id cannot be trusted (compute-id: /var/lib/nova/compute_id does not hold "
        "a UUID) (passed: hostname, type, node-uuid)"
    ), verdict.reason
