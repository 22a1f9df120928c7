"""Is the libvirt being read the hypervisor Nova calls ``host``? Pure.

A wrong ``[DEFAULT] host`` or ``[libvirt] connection_uri`` (a copied config) makes
every guest Nova runs here look like another host's duplicate; acting on that view
stops healthy guests (Nova bug 1419785 is the same failure inside Nova). So before
anything is concluded, these identities are compared (docs/design.md rule 10):

- Nova's compute node(s) of ``host`` (``os-hypervisors``): hostname, type, node UUID;
- libvirt's own identity: ``getHostname()`` and ``getType()``, exactly what Nova's
  libvirt driver reports as ``hypervisor_hostname`` and ``hypervisor_type``;
- nova-compute's ``compute_id`` file (Nova >= 2023.1), which holds the node UUID;
- the node UUID the operator pinned in our config (``[DEFAULT] compute_node_uuid``).

Every check is passed, failed, skipped or inconclusive, with a reason. One failure
is a mismatch. Names are no proof: another cloud (a wrong ``[nova]`` section, a
wrong region) built from the same inventory has a compute of the same host name,
hostname and type. So the view is *verified* only when nothing failed, nothing was
inconclusive and a node UUID found on this machine (``compute_id``) or pinned by the
operator is Nova's node of ``host``; otherwise it is *unproven* and nothing may be
acted on.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

#: Nova's fake driver (its own test double) reports this hypervisor type.
NOVA_FAKE_TYPE = "fake"


@dataclasses.dataclass(frozen=True)
class NovaNode:
    """One compute node as ``GET /os-hypervisors/detail`` shows it."""

    uuid: str
    hypervisor_hostname: str
    hypervisor_type: str
    #: The nova-compute service's host (``service.host``).
    host: str

    def describe(self) -> str:
        """``node 'n' (TYPE)``, as the operator reads it."""
        return f"node {self.hypervisor_hostname!r} ({self.hypervisor_type})"


@dataclasses.dataclass(frozen=True)
class LibvirtIdentity:
    """What the libvirt connection being read says it is."""

    uri: str
    hostname: str
    hypervisor_type: str
    #: The host UUID from libvirt's capabilities (None where the driver has none).
    host_uuid: str | None = None

    def describe(self) -> str:
        """``libvirt URI is 'hostname' (TYPE)``."""
        return f"libvirt {self.uri} is {self.hostname!r} ({self.hypervisor_type})"

    def is_node(self, node: NovaNode) -> bool:
        """True when ``node`` is what Nova's libvirt driver would report for this libvirt."""
        return (node.hypervisor_hostname, node.hypervisor_type) == (
            self.hostname,
            self.hypervisor_type,
        )


@dataclasses.dataclass(frozen=True)
class LocalComputeId:
    """nova-compute's ``compute_id`` file(s) on this machine.

    ``uuids`` maps each file read to the UUID it holds (canonical); ``unusable``
    names each file found that could not be trusted (unreadable, not a regular
    file, too large, not a UUID); ``absent`` says where none was found.
    """

    uuids: dict[str, str] = dataclasses.field(default_factory=dict)
    absent: str = "not looked for"
    unusable: tuple[str, ...] = ()


class Check(str, enum.Enum):
    """The identity checks, in the order they are reported."""

    NOVA_NODE = "nova-node"
    LIBVIRT_OWNER = "libvirt-owner"
    HOSTNAME = "hostname"
    TYPE = "type"
    COMPUTE_ID = "compute-id"
    NODE_UUID = "node-uuid"


#: The checks that prove this machine is Nova's node of ``host``; one must pass.
#: NOTE: hostname and type are names: they can only refute (fail), never prove.
PROOF = frozenset({Check.COMPUTE_ID, Check.NODE_UUID})
#: The checks that compare this machine with ``host``'s node (listed when they pass).
COMPARED = PROOF | {Check.HOSTNAME, Check.TYPE}


class CheckStatus(str, enum.Enum):
    """What became of one check."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    #: Something is there but cannot be trusted: the view stays unproven.
    INCONCLUSIVE = "inconclusive"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check, its status, and why."""

    check: Check
    status: CheckStatus
    detail: str


class State(str, enum.Enum):
    """The verdict: act only when ``VERIFIED``."""

    VERIFIED = "verified"
    UNPROVEN = "unproven"
    MISMATCH = "mismatch"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The result of the identity comparison; ``reason`` is one line."""

    host: str
    state: State
    results: tuple[CheckResult, ...]
    reason: str
    #: What was compared: the libvirt read (its host UUID included) and Nova's node(s) of host.
    libvirt: LibvirtIdentity | None = None
    nodes: tuple[NovaNode, ...] = ()

    @property
    def verified(self) -> bool:
        """True only when a proof passed and nothing failed or was inconclusive."""
        return self.state is State.VERIFIED


def verify(
    host: str,
    nodes: Sequence[NovaNode],
    libvirt: LibvirtIdentity,
    compute_id: LocalComputeId,
    pinned_node: str | None = None,
) -> Verdict:
    """Compare Nova's node(s) of ``host`` with the libvirt read, the local compute_id
    and the node UUID the operator pinned (``pinned_node``, canonical; None: not pinned).

    ``nodes``: every node Nova returned — those of ``host`` and those whose
    hostname is libvirt's (so another host's claim on this libvirt is seen).
    """
    mine = [n for n in nodes if n.host == host]
    owners = [n for n in nodes if n.host != host and libvirt.is_node(n)]
    results = [_node_check(host, mine), _owner_check(libvirt, owners)]
    results += _libvirt_checks(mine, libvirt)
    results.append(_compute_id_check(host, mine, compute_id))
    results.append(_pinned_check(host, mine, pinned_node))
    verdict = _verdict(host, mine, owners, libvirt, tuple(results))
    return dataclasses.replace(verdict, libvirt=libvirt, nodes=tuple(mine))


def _node_check(host: str, mine: list[NovaNode]) -> CheckResult:
    if not mine:
        return CheckResult(
            Check.NOVA_NODE, CheckStatus.FAILED, f"Nova has no compute node for host {host!r}"
        )
    nodes = ", ".join(f"{n.describe()} {n.uuid}" for n in mine)
    return CheckResult(Check.NOVA_NODE, CheckStatus.PASSED, f"Nova's host {host!r} has {nodes}")


def _owner_check(libvirt: LibvirtIdentity, owners: list[NovaNode]) -> CheckResult:
    if owners:
        hosts = ", ".join(repr(n.host) for n in owners)
        return CheckResult(
            Check.LIBVIRT_OWNER,
            CheckStatus.FAILED,
            f"Nova knows {libvirt.uri} ({libvirt.hostname!r}) as the node of host {hosts}",
        )
    return CheckResult(
        Check.LIBVIRT_OWNER, CheckStatus.PASSED, "no other host's node is this libvirt"
    )


def _libvirt_checks(mine: list[NovaNode], libvirt: LibvirtIdentity) -> list[CheckResult]:
    if not mine:
        why = "no node of this host to compare with"
        return [CheckResult(c, CheckStatus.SKIPPED, why) for c in (Check.HOSTNAME, Check.TYPE)]
    same_type = [n for n in mine if n.hypervisor_type == libvirt.hypervisor_type]
    if not same_type and all(n.hypervisor_type == NOVA_FAKE_TYPE for n in mine):
        # NOTE: Nova's fake driver has no hypervisor: whatever libvirt stands in for it
        # (in test stacks) has nothing to be compared with. Skipped, and said so; another
        # host's claim on this libvirt still fails, and a proof (compute_id, the pinned
        # node UUID) must pass before anything is done, as for every node.
        why = f"Nova's node is its {NOVA_FAKE_TYPE!r} driver: no hypervisor to compare"
        return [CheckResult(c, CheckStatus.SKIPPED, why) for c in (Check.HOSTNAME, Check.TYPE)]
    if not same_type:
        types = ", ".join(sorted({n.hypervisor_type for n in mine}))
        return [
            CheckResult(Check.HOSTNAME, CheckStatus.SKIPPED, "the hypervisor types differ"),
            CheckResult(
                Check.TYPE,
                CheckStatus.FAILED,
                f"Nova's node is {types}, libvirt is {libvirt.hypervisor_type}",
            ),
        ]
    type_ok = CheckResult(Check.TYPE, CheckStatus.PASSED, f"both {libvirt.hypervisor_type}")
    if any(n.hypervisor_hostname == libvirt.hostname for n in same_type):
        return [
            CheckResult(Check.HOSTNAME, CheckStatus.PASSED, f"both {libvirt.hostname!r}"),
            type_ok,
        ]
    names = ", ".join(repr(n.hypervisor_hostname) for n in same_type)
    return [
        CheckResult(
            Check.HOSTNAME,
            CheckStatus.FAILED,
            f"Nova's node is {names}, libvirt reports {libvirt.hostname!r}",
        ),
        type_ok,
    ]


def _compute_id_check(host: str, mine: list[NovaNode], compute_id: LocalComputeId) -> CheckResult:
    if compute_id.unusable:
        # NOTE: nova-compute refuses to start on such a file; we do not guess past it.
        return CheckResult(
            Check.COMPUTE_ID, CheckStatus.INCONCLUSIVE, "; ".join(compute_id.unusable)
        )
    if len(set(compute_id.uuids.values())) > 1:
        files = ", ".join(f"{path} holds {value}" for path, value in compute_id.uuids.items())
        return CheckResult(
            Check.COMPUTE_ID, CheckStatus.INCONCLUSIVE, f"compute_id files disagree: {files}"
        )
    if not compute_id.uuids:
        return CheckResult(Check.COMPUTE_ID, CheckStatus.SKIPPED, compute_id.absent)
    path, value = next(iter(compute_id.uuids.items()))
    return _uuid_check(Check.COMPUTE_ID, host, mine, value, f"{path} holds")


def _pinned_check(host: str, mine: list[NovaNode], pinned: str | None) -> CheckResult:
    if pinned is None:
        return CheckResult(Check.NODE_UUID, CheckStatus.SKIPPED, "no compute_node_uuid configured")
    return _uuid_check(Check.NODE_UUID, host, mine, pinned, "compute_node_uuid is")


def _uuid_check(
    check: Check, host: str, mine: list[NovaNode], value: str, source: str
) -> CheckResult:
    """``source`` (a file, the config) names ``value``: is it Nova's node of ``host``?"""
    if not mine:
        return CheckResult(check, CheckStatus.SKIPPED, "no node of this host to compare with")
    if any(n.uuid == value for n in mine):
        return CheckResult(check, CheckStatus.PASSED, f"{source} Nova's node {value}")
    uuids = ", ".join(n.uuid for n in mine)
    return CheckResult(
        check,
        CheckStatus.FAILED,
        f"{source} node UUID {value}, Nova's node of {host!r} is {uuids}",
    )


def _verdict(
    host: str,
    mine: list[NovaNode],
    owners: list[NovaNode],
    libvirt: LibvirtIdentity,
    results: tuple[CheckResult, ...],
) -> Verdict:
    failed = [r for r in results if r.status is CheckStatus.FAILED]
    nova_side = (
        f"Nova's host {host!r} is " + ", ".join(n.describe() for n in mine)
        if mine
        else f"Nova has no compute node for host {host!r}"
    )
    libvirt_side = libvirt.describe() + "".join(
        f", which Nova knows as the node of host {n.host!r}" for n in owners
    )
    if failed:
        # NOTE: both sides already tell the node, owner, hostname and type; only the
        # UUIDs' details are not in them.
        why = ", ".join(
            f"{r.check.value}: {r.detail}" if r.check in PROOF else r.check.value for r in failed
        )
        joint = " but " if any(r.check not in PROOF for r in failed) else "; "
        return Verdict(
            host,
            State.MISMATCH,
            results,
            f"identity mismatch: {nova_side}{joint}{libvirt_side} (failed: {why})",
        )
    passed = [
        r.check.value for r in results if r.status is CheckStatus.PASSED and r.check in COMPARED
    ]
    doubtful = [r for r in results if r.status is CheckStatus.INCONCLUSIVE]
    proven = any(r.status is CheckStatus.PASSED for r in results if r.check in PROOF)
    if proven and not doubtful:
        skipped_checks = [r.check.value for r in results if r.status is CheckStatus.SKIPPED]
        also = f"; skipped: {', '.join(skipped_checks)}" if skipped_checks else ""
        return Verdict(
            host,
            State.VERIFIED,
            results,
            f"identity verified: {nova_side} and {libvirt_side} "
            f"(passed: {', '.join(passed)}{also})",
        )
    skipped = "; ".join(
        f"{r.check.value}: {r.detail}" for r in results if r.status is CheckStatus.SKIPPED
    )
    if doubtful:
        why = "; ".join(f"{r.check.value}: {r.detail}" for r in doubtful)
        head = f"a compute_id cannot be trusted ({why})"
    else:
        head = "no compute_id or compute_node_uuid tied them"
    notes = [f"passed: {', '.join(passed)}" + ("" if proven else " (names are no proof)")]
    notes = (notes if passed else []) + ([f"skipped: {skipped}"] if skipped else [])
    return Verdict(
        host,
        State.UNPROVEN,
        results,
        f"identity not proven: {nova_side}, {libvirt_side}; {head}"
        + (f" ({'; '.join(notes)})" if notes else ""),
    )


def proven_node(verdict: Verdict) -> str | None:
    """The UUID of Nova's one compute node of the host, when identity proved it; else None.

    NOTE: docs/design.md rule 22: an allocation's provider is this node's UUID, never one
    found by name (a same-named provider of another cloud or region is another node).
    """
    nodes = {n.uuid for n in verdict.nodes if n.host == verdict.host}
    return nodes.pop() if verdict.verified and len(nodes) == 1 else None
