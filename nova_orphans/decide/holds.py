"""The operator's decision wins (docs/design.md rules 12 and 13). Pure.

A guest is put *on hold* when someone else started it after the agent stopped it,
and whenever the operator restores it from quarantine. The decider gives a held
guest no step until the operator releases it (``nova-orphans release UUID``).
``restore`` asks Nova first and refuses to start a second copy of a server Nova runs.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from nova_orphans.model import Finding, Server


@dataclasses.dataclass(frozen=True)
class Hold:
    """A guest the agent must not act on until the operator releases it."""

    uuid: str
    since: datetime.datetime
    reason: str
    released_at: datetime.datetime | None = None

    def describe(self) -> str:
        """``on hold since T (reason)``, as audit and the logs print it."""
        return f"on hold since {self.since.isoformat()} ({self.reason})"


@dataclasses.dataclass(frozen=True)
class LastStep:
    """The journal's last completed live (not dry-run) step on one guest.

    ``intent``: its place in the journal's order of intents (its id).
    """

    step: str
    finished_at: datetime.datetime
    intent: int


def started_by_someone_else(
    findings: Iterable[Finding],
    last_steps: Mapping[str, LastStep],
    last_release: Mapping[str, int],
    holds: Mapping[str, Hold],
) -> dict[str, str]:
    """Guests to put on hold now, with the reason: running again after the agent stopped them.

    A guest counts when its last completed live step is a ``stop``, no release came
    after that stop, it is not on hold already, and its domain is active now.
    ``last_release``: per guest, the last intent the journal held when the guest was
    last released.

    NOTE: "after" is the journal's order, not the wall clock's: a clock step must
    not make a release look later than a stop (docs/design.md rule 15).
    """
    found = {}
    for finding in findings:
        last = last_steps.get(finding.uuid)
        if finding.uuid in holds or last is None or last.step != "stop":
            continue
        released = last_release.get(finding.uuid)
        if released is not None and released >= last.intent:
            continue
        if finding.domain is not None and finding.domain.is_active:
            found[finding.uuid] = (
                "started by someone else after the agent stopped it at "
                f"{last.finished_at.isoformat()}"
            )
    return found


def held_why(hold: Hold) -> str:
    """Why the decider gives a held guest no step."""
    return (
        f"on hold: {hold.reason}, since {hold.since.isoformat()} — "
        f"release with `nova-orphans release {hold.uuid}`"
    )


@dataclasses.dataclass(frozen=True)
class RestoreVerdict:
    """What ``restore`` may do after asking Nova.

    ``refusal``: why nothing may change (None: go ahead); ``warning``: a line to
    print while going ahead; ``hold_reason``: the reason of the hold the restored
    guest is put on (it says when ``--force`` overrode Nova).
    """

    refusal: str | None
    warning: str | None
    hold_reason: str


def nova_runs(server: Server | None) -> bool:
    """True when Nova has a live (not deleted) record of the server, on any host or none."""
    return server is not None and not server.deleted


def restore_verdict(
    uuid: str,
    server: Server | None,
    nova_error: str | None,
    *,
    start: bool,
    force: bool,
    reaped: str,
    saved_state: bool = False,
) -> RestoreVerdict:
    """Decide a ``restore`` from Nova's answer (``server``) or why Nova could not answer.

    NOTE: a restored copy of a server Nova runs elsewhere is the two-running-copies
    situation this tool exists to prevent: ``--start`` is refused, a plain define
    warns, and a Nova that cannot be asked refuses both (fail closed). ``--force``
    overrides, and the hold's reason says so. ``saved_state``: the entry holds a
    managed-save image; bringing it back runs the guest (paused) on its disks, so it
    is refused like ``--start``.
    """
    what = "restored from quarantine" + (" and started" if start else "") + f" (reaped {reaped})"
    if nova_error is not None:
        problem = f"Nova could not be asked ({nova_error})"
        if not force:
            return RestoreVerdict(
                f"{problem}; nothing restored — retry, or --force if you know better", None, what
            )
        return RestoreVerdict(None, f"--force: {problem}", f"{what}; forced: {problem}")
    if not nova_runs(server):
        return RestoreVerdict(None, None, what)
    assert server is not None
    where = f"on host {server.host}" if server.host else "with no host"
    runs = f"Nova runs server {uuid} {where} (status {server.status})"
    if force:
        return RestoreVerdict(None, f"--force: {runs}", f"{what}; forced: {runs}")
    if start:
        return RestoreVerdict(
            f"{runs}: starting this copy would run it twice; nothing restored — "
            "restore without --start, or --force if you know better",
            None,
            what,
        )
    if saved_state:
        return RestoreVerdict(
            f"{runs}: bringing back its managed-save image runs this copy (paused, its disks "
            "open) beside it; nothing restored — --force if you know better",
            None,
            what,
        )
    return RestoreVerdict(None, f"{runs}: defined but not started — do not start this copy", what)
