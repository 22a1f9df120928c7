"""Is the libvirt being read the hypervisor Nova calls ``host``? Pure.

A wrong ``[DEFAULT] host`` or ``[libvirt] connection_uri`` (a copied config) makes
every guest Nova runs here look like another host's duplicate; acting on that view
stops healthy guests (Nova bug 1419785 is the same failure inside Nova). So before
anything is concluded, three identities are compared (docs/design.md rule 10):

- Nova's compute node(s) of ``host`` (``os-hypervisors``): hostname, type, node UUID;
- libvirt's own identity: ``getHostname()`` and ``getType()``, exactly what Nova's
  libvirt driver reports as ``hypervisor_hostname`` and ``hypervisor_type``;
- nova-compute's ``compute_id`` file (Nova >= 2023.1), which holds the node UUID.

Every check is passed, failed or skipped, with a reason. One failure is a
mismatch. The view is *verified* only when nothing failed and at least one check
tying this machine to ``host`` passed; otherwise it is *unproven* and nothing may
be acted on.
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

    ``uuids`` maps each file found to its content (stripped); empty when none
    was found, and then ``absent`` says why (no file, or nothing configured).
    """

    uuids: dict[str, str] = dataclasses.field(default_factory=dict)
    absent: str = "not looked for"


class Check(str, enum.Enum):
    """The identity checks, in the order they are reported."""

    NOVA_NODE = "nova-node"
    LIBVIRT_OWNER = "libvirt-owner"
    HOSTNAME = "hostname"
    TYPE = "type"
    COMPUTE_ID = "compute-id"


#: Checks that tie the libvirt (or this machine) to ``host``; one must pass.
POSITIVE = frozenset({Check.HOSTNAME, Check.TYPE, Check.COMPUTE_ID})


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check, its outcome, and why."""

    check: Check
    outcome: Outcome
    detail: str


class State(str, enum.Enum):
    """The verdict: act only when ``VERIFIED``."""

    VERIFIED = "verified"
    UNPROVEN = "unproven"
    MISMATCH = "mismatch"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The outcome of the identity comparison; ``reason`` is one line."""

    host: str
    state: State
    results: tuple[CheckResult, ...]
    reason: str
    #: What was compared: the libvirt read (its host UUID included) and Nova's node(s) of host.
    libvirt: LibvirtIdentity | None = None
    nodes: tuple[NovaNode, ...] = ()

    @property
    def verified(self) -> bool:
        """True only when a positive check passed and none failed."""
        return self.state is State.VERIFIED


def verify(
    host: str,
    nodes: Sequence[NovaNode],
    libvirt: LibvirtIdentity,
    compute_id: LocalComputeId,
) -> Verdict:
    """Compare Nova's node(s) of ``host`` with the libvirt read and the local compute_id.

    ``nodes``: every node Nova returned — those of ``host`` and those whose
    hostname is libvirt's (so another host's claim on this libvirt is seen).
    """
    mine = [n for n in nodes if n.host == host]
    owners = [n for n in nodes if n.host != host and libvirt.is_node(n)]
    results = [_node_check(host, mine), _owner_check(libvirt, owners)]
    results += _libvirt_checks(mine, libvirt)
    results.append(_compute_id_check(host, mine, compute_id))
    verdict = _verdict(host, mine, owners, libvirt, tuple(results))
    return dataclasses.replace(verdict, libvirt=libvirt, nodes=tuple(mine))


def _node_check(host: str, mine: list[NovaNode]) -> CheckResult:
    if not mine:
        return CheckResult(
            Check.NOVA_NODE, Outcome.FAILED, f"Nova has no compute node for host {host!r}"
        )
    nodes = ", ".join(f"{n.describe()} {n.uuid}" for n in mine)
    return CheckResult(Check.NOVA_NODE, Outcome.PASSED, f"Nova's host {host!r} has {nodes}")


def _owner_check(libvirt: LibvirtIdentity, owners: list[NovaNode]) -> CheckResult:
    if owners:
        hosts = ", ".join(repr(n.host) for n in owners)
        return CheckResult(
            Check.LIBVIRT_OWNER,
            Outcome.FAILED,
            f"Nova knows {libvirt.uri} ({libvirt.hostname!r}) as the node of host {hosts}",
        )
    return CheckResult(Check.LIBVIRT_OWNER, Outcome.PASSED, "no other host's node is this libvirt")


def _libvirt_checks(mine: list[NovaNode], libvirt: LibvirtIdentity) -> list[CheckResult]:
    if not mine:
        why = "no node of this host to compare with"
        return [CheckResult(c, Outcome.SKIPPED, why) for c in (Check.HOSTNAME, Check.TYPE)]
    same_type = [n for n in mine if n.hypervisor_type == libvirt.hypervisor_type]
    if not same_type and all(n.hypervisor_type == NOVA_FAKE_TYPE for n in mine):
        # NOTE: Nova's fake driver has no hypervisor: whatever libvirt stands in for it
        # (in test stacks) has nothing to be compared with. Skipped, and said so; another
        # host's claim on this libvirt still fails, and a positive check (compute_id)
        # must pass before anything is done.
        why = f"Nova's node is its {NOVA_FAKE_TYPE!r} driver: no hypervisor to compare"
        return [CheckResult(c, Outcome.SKIPPED, why) for c in (Check.HOSTNAME, Check.TYPE)]
    if not same_type:
        types = ", ".join(sorted({n.hypervisor_type for n in mine}))
        return [
            CheckResult(Check.HOSTNAME, Outcome.SKIPPED, "the hypervisor types differ"),
            CheckResult(
                Check.TYPE,
                Outcome.FAILED,
                f"Nova's node is {types}, libvirt is {libvirt.hypervisor_type}",
            ),
        ]
    type_ok = CheckResult(Check.TYPE, Outcome.PASSED, f"both {libvirt.hypervisor_type}")
    if any(n.hypervisor_hostname == libvirt.hostname for n in same_type):
        return [
            CheckResult(Check.HOSTNAME, Outcome.PASSED, f"both {libvirt.hostname!r}"),
            type_ok,
        ]
    names = ", ".join(repr(n.hypervisor_hostname) for n in same_type)
    return [
        CheckResult(
            Check.HOSTNAME,
            Outcome.FAILED,
            f"Nova's node is {names}, libvirt reports {libvirt.hostname!r}",
        ),
        type_ok,
    ]


def _compute_id_check(host: str, mine: list[NovaNode], compute_id: LocalComputeId) -> CheckResult:
    if not compute_id.uuids:
        return CheckResult(Check.COMPUTE_ID, Outcome.SKIPPED, compute_id.absent)
    if len(set(compute_id.uuids.values())) > 1:
        files = ", ".join(f"{path} holds {value}" for path, value in compute_id.uuids.items())
        return CheckResult(Check.COMPUTE_ID, Outcome.FAILED, f"compute_id files disagree: {files}")
    path, value = next(iter(compute_id.uuids.items()))
    if not mine:
        return CheckResult(
            Check.COMPUTE_ID, Outcome.SKIPPED, "no node of this host to compare with"
        )
    if any(n.uuid == value for n in mine):
        return CheckResult(Check.COMPUTE_ID, Outcome.PASSED, f"{path} holds Nova's node {value}")
    uuids = ", ".join(n.uuid for n in mine)
    return CheckResult(
        Check.COMPUTE_ID,
        Outcome.FAILED,
        f"{path} holds node UUID {value}, Nova's node of {host!r} is {uuids}",
    )


def _verdict(
    host: str,
    mine: list[NovaNode],
    owners: list[NovaNode],
    libvirt: LibvirtIdentity,
    results: tuple[CheckResult, ...],
) -> Verdict:
    failed = [r for r in results if r.outcome is Outcome.FAILED]
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
        # compute_id's detail is not in them.
        why = ", ".join(
            f"{r.check.value}: {r.detail}" if r.check is Check.COMPUTE_ID else r.check.value
            for r in failed
        )
        joint = " but " if any(r.check is not Check.COMPUTE_ID for r in failed) else "; "
        return Verdict(
            host,
            State.MISMATCH,
            results,
            f"identity mismatch: {nova_side}{joint}{libvirt_side} (failed: {why})",
        )
    passed = [r.check.value for r in results if r.outcome is Outcome.PASSED and r.check in POSITIVE]
    if passed:
        skipped_checks = [r.check.value for r in results if r.outcome is Outcome.SKIPPED]
        also = f"; skipped: {', '.join(skipped_checks)}" if skipped_checks else ""
        return Verdict(
            host,
            State.VERIFIED,
            results,
            f"identity verified: {nova_side} and {libvirt_side} "
            f"(passed: {', '.join(passed)}{also})",
        )
    skipped = "; ".join(
        f"{r.check.value}: {r.detail}" for r in results if r.outcome is Outcome.SKIPPED
    )
    return Verdict(
        host,
        State.UNPROVEN,
        results,
        f"identity not proven: {nova_side}, {libvirt_side}; no check tied them (skipped: "
        f"{skipped})",
    )
