"""What the operator allows the agent to do, as plain data (built from the config elsewhere)."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping

from nova_orphans.model import ACTIONABLE_KINDS, Kind, Selector


class Action(str, enum.Enum):
    """What the operator configured for a kind of finding."""

    LOG = "log"
    STOP = "stop"
    REAP = "reap"
    #: Delete a quarantine entry for good (the retention purge); never in a plan.
    PURGE = "purge"
    #: Define (and maybe start) a reaped guest again (the operator's restore); never in a plan.
    RESTORE = "restore"


class Step(str, enum.Enum):
    """One destructive step the actuator may take in a cycle.

    ``stop``: graceful shutdown, then power off; the domain stays defined.
    ``reap``: quarantine the domain XML (and, for deleted/unknown, the instance
    directory), then undefine. A running guest is always stopped first.
    ``purge`` and ``restore`` act on the quarantine; they pass the same gate, journal
    and record as the others (docs/design.md rule 19).
    """

    STOP = "stop"
    REAP = "reap"
    #: Delete a quarantine entry for good (the retention purge); never in a plan.
    PURGE = "purge"
    #: Define (and maybe start) a reaped guest again (the operator's restore); never in a plan.
    RESTORE = "restore"


#: Seconds to wait for a graceful shutdown before powering a guest off (``[agent] stop_timeout``).
STOP_TIMEOUT = 60.0
#: The longest quarantine retention (``[agent] quarantine_retention_days``, ``purge
#: --older-than``) a date can hold comfortably: a hundred years.
MAX_RETENTION_DAYS = 36500


@dataclasses.dataclass(frozen=True)
class Policy:
    """The agent's rules of engagement. Every default is the cautious one."""

    #: Per-kind action; kinds not listed, and every kind outside ACTIONABLE_KINDS, only log.
    actions: Mapping[Kind, Action] = dataclasses.field(default_factory=dict)
    #: Seconds a finding must exist before any step: for ``deleted`` counted from Nova's
    #: deletion time, for the other kinds from the first sighting.
    grace_period: float = 3600.0
    #: Consecutive cycles a finding must be seen, unchanged in kind, before any step.
    sightings_required: int = 3
    #: Seconds a reap-bound guest stays stopped (and so recoverable in place) before it is reaped.
    reap_delay: float = 86400.0
    #: Destructive steps per cycle, at most.
    max_actions_per_cycle: int = 1
    #: Above this fraction of Nova-marked domains being actionable orphans, the cycle only reports.
    max_orphan_fraction: float = 0.5
    #: The fraction brake applies from this many actionable orphans on (one orphan on a host
    #: with one other guest is ordinary).
    brake_min_orphans: int = 2
    #: When not empty, only these guests may be acted on.
    allow: Selector = dataclasses.field(default_factory=Selector)
    #: Seconds between two agent cycles (``[agent] interval``). grace_period and reap_delay
    #: need as many cycles as they imply as well as the wall-clock delay (docs/design.md
    #: rule 15), and a sighting less than half of it after the previous one does not count.
    interval: float = 600.0
    #: Stop a ``deleted`` guest with a shared-volume danger at once: no grace, no
    #: sightings (docs/design.md rule 18). Off by default.
    stop_shared_volume_at_once: bool = False
    #: ``[leftovers]``: looks and seconds before a leftover's command is told (docs/design.md
    #: rule 22); None: as for the guests (``sightings_required``, ``grace_period``).
    leftover_sightings_required: int | None = None
    leftover_grace_period: float | None = None

    @property
    def leftover_looks(self) -> int:
        """Looks a leftover must be seen in before its command is told."""
        return self.leftover_sightings_required or self.sightings_required

    @property
    def leftover_grace(self) -> float:
        """Seconds from a leftover's first sighting before its command is told."""
        grace = self.leftover_grace_period
        return self.grace_period if grace is None else grace

    def cycles_for(self, seconds: float) -> int:
        """The agent cycles a delay of ``seconds`` implies: ceil(seconds / interval), at least 0.

        NOTE: a wall-clock step forward (NTP) makes any delay look passed at once;
        cycles cannot be skipped that way, so each delay needs both.
        """
        return math.ceil(seconds / self.interval) if seconds > 0 else 0

    @property
    def acts(self) -> bool:
        """Whether any finding may be stopped or reaped (else the agent only logs).

        NOTE: ``stop_shared_volume_at_once`` makes a stop of a ``log`` kind: it acts.
        """
        if self.stop_shared_volume_at_once:
            return True
        return any(self.action_for(kind) is not Action.LOG for kind in ACTIONABLE_KINDS)

    def action_for(self, kind: Kind) -> Action:
        """The configured action for ``kind``; never anything but LOG outside ACTIONABLE_KINDS."""
        if kind not in ACTIONABLE_KINDS:
            return Action.LOG
        return self.actions.get(kind, Action.LOG)
