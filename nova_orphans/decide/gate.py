"""The one gate every destructive step passes: a cycle's safety verdict. Pure.

docs/design.md rule 19: whether anything destructive may happen at all is decided
once, here, from what the cycle established — the libvirt read is proven to be
this Nova's host, no brake holds, every look succeeded, and this process holds the
live agent's lock — and the actuator refuses every stop, reap, purge and restore
unless the verdict is clear. Policy features (``stop_shared_volume_at_once``, the
allow list, the actions) decide *which* steps are due; they can withhold or delay a
step, never grant one past the gate.
"""

from __future__ import annotations

import dataclasses

from nova_orphans.classify.identity import Verdict


@dataclasses.dataclass(frozen=True)
class SafetyVerdict:
    """Whether a destructive step may be taken now; ``why`` says why (not), in one line."""

    clear: bool
    why: str


#: The verdict of a process that established nothing: every step is refused.
CLOSED = SafetyVerdict(False, "no safety verdict was reached")


def judge(
    *,
    identity: Verdict,
    brake: str | None,
    holds_lock: bool,
) -> SafetyVerdict:
    """The cycle's safety verdict: clear only when every condition holds.

    ``identity``: the cycle's identity verdict; ``brake``: why the plan only reports
    (None: no brake); ``holds_lock``: whether this process holds the live agent's lock.
    NOTE: every look succeeded, or there is no verdict: a look that fails (Nova,
    libvirt, identity) ends the cycle before it is judged, and a process that has
    no verdict has no actuator (``CLOSED`` is the verdict of one that must not act).
    """
    closed = []
    if not holds_lock:
        closed.append("this process does not hold the live agent's lock")
    if not identity.verified:
        closed.append(identity.reason)
    if brake and brake != identity.reason:
        # NOTE: the plan brakes on an unproven identity too; it is said once.
        closed.append(f"brake: {brake}")
    if closed:
        return SafetyVerdict(False, "; ".join(closed))
    return SafetyVerdict(
        True, "identity verified, no brake, every look succeeded, the live lock is held"
    )


def operator_command(command: str) -> SafetyVerdict:
    """The verdict of an operator's own command on the quarantine (``purge``, ``restore``).

    NOTE: no cycle is observed there: the operator asked for this one step, and the
    command's own guards come first (rule 7's tampering check; rule 13's question to
    Nova, which only ``--force`` overrides). The actuator still takes such a step only
    with the quarantine's lock held, as it does the agent's purge.
    """
    return SafetyVerdict(True, f"{command}: the operator's own command")


def operator_restore(identity: Verdict) -> SafetyVerdict:
    """The verdict of the operator's ``restore``: its own command, on a proven host only.

    NOTE: restore asks Nova whether it runs the server before it defines or starts
    the guest (rule 13); a ``[nova]`` pointing at another cloud would answer "no
    record" for a server the right cloud runs elsewhere, and the start would make a
    second copy. So the libvirt read must be proven to be this Nova's node (rule 10)
    first, as for every step of the agent; ``--force`` does not lift this.
    """
    if not identity.verified:
        return SafetyVerdict(False, f"restore: {identity.reason}")
    return operator_command("restore")


def judge_told(*, identity: Verdict, brake: str | None) -> SafetyVerdict:
    """The verdict a told step needs (docs/design.md rule 22): a command the tool prints is
    a step taken by proxy, so it is printed only when the cycle could take one.

    NOTE: the live lock is not asked for: ``audit`` tells, and never takes the live
    agent's lock; what it tells is the operator's step, taken when they run it. Every
    look succeeded, or there is no report to tell from; a kind whose listing was not
    complete is "not checked" and tells nothing.
    """
    closed = [] if identity.verified else [identity.reason]
    if brake and brake != identity.reason:
        closed.append(f"brake: {brake}")
    if closed:
        return SafetyVerdict(False, "; ".join(closed))
    return SafetyVerdict(True, "identity verified, no brake, every look succeeded")
