"""The simulated host's effects, watched: every destructive call is checked against ground truth.

``CheckedEffects`` runs ``SimulatedEffects`` unchanged, but first asks the
simulation whether the step is allowed *at this moment* (safety invariant 1),
whether an intent is open for it (invariant 4) and whether the cycle's cap
still allows it; it also injects the history's crashes and failures, and keeps
its quarantine as real directories so that reconciliation after a crash can
adopt them, as it would on a real host.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from nova_orphans.act.effects import EffectError, FilesResult
from nova_orphans.act.quarantine import manifest as manifests
from nova_orphans.act.quarantine.manifest import Kept, Manifest
from nova_orphans.fakes.host import Quarantined, SimulatedEffects, SimulatedHost
from nova_orphans.model import Domain

DESTRUCTIVE = frozenset({"stop", "undefine", "move_instance_files"})


class Crash(BaseException):
    """The agent process dies (not an Exception: nothing in the product may catch it)."""


@dataclasses.dataclass
class Reaped:
    """A guest the agent undefined: what it was, to compare a restore with."""

    xml: str
    files: str | None
    domain: Domain
    #: Managed save, snapshots and backing files libvirt held for it.
    state: Kept = dataclasses.field(default_factory=Kept)


class CheckedEffects(SimulatedEffects):
    """``SimulatedEffects`` with checks before, and injected crashes around, every call.

    ``check(method, uuid, domain)`` returns the violations, as (invariant, detail), a
    destructive call would commit now (empty when allowed); they go to ``violations``.
    """

    def __init__(
        self,
        host: SimulatedHost,
        quarantine_root: str,
        check: Callable[[str, str, Domain], list[tuple[str, str]]],
        purge_check: Callable[[str, str], list[tuple[str, str]]] = lambda uuid, directory: [],
    ) -> None:
        super().__init__(host)
        self.quarantine_root = quarantine_root
        self.check = check
        #: ``purge_check(uuid, directory)``: the violations a purge would commit now.
        self.purge_check = purge_check
        self.purges_done = 0
        self.violations: list[tuple[str, str]] = []
        self.reaped: dict[str, Reaped] = {}
        #: Per cycle: the crash point (n, "before"|"after"), effect calls so far, guests touched.
        self.crash: tuple[int, str] | None = None
        self.cycle_calls = self.total_calls = 0
        self.cycle_guests: set[str] = set()
        #: Called with the guest's UUID before every effect call (for races, see ``Run``).
        self.before_effect: Callable[[str], None] | None = None
        self.stops_done = 0
        self.reaps_done = 0

    def new_cycle(self, crash: tuple[int, str] | None, fail: tuple[str, ...]) -> None:
        """Arm this cycle's crash and failures; reset the per-cycle counters."""
        self.crash, self.fail = crash, set(fail)
        self.cycle_calls, self.cycle_guests = 0, set()

    def _around(self, method: str, uuid: str, when: str) -> None:
        if when == "before":
            self.cycle_calls += 1
            self.total_calls += 1
        if self.crash == (self.cycle_calls - 1, when):
            self.crash = None
            raise Crash(f"{when} {method} of {uuid}")

    def _watched(self, method: str, uuid: str) -> None:
        if self.before_effect:
            self.before_effect(uuid)
        self._around(method, uuid, "before")
        if method not in DESTRUCTIVE:
            return
        self.cycle_guests.add(uuid)
        domain = self.host.domains.get(uuid)
        if domain is None and uuid in self.reaped:
            domain = self.reaped[uuid].domain
        if domain is not None:
            self.violations += self.check(method, uuid, domain)

    def stop(self, uuid: str, timeout: float) -> str:
        self._watched("stop", uuid)
        detail = super().stop(uuid, timeout)
        self.stops_done += 1
        self._around("stop", uuid, "after")
        return detail

    def domain_xml(self, uuid: str) -> str:
        self._watched("domain_xml", uuid)
        xml = super().domain_xml(uuid)
        self._around("domain_xml", uuid, "after")
        return xml

    def quarantine_dir(self, uuid: str, stamp: str) -> str:
        self._watched("quarantine_dir", uuid)
        path = os.path.join(self.quarantine_root, uuid, stamp)
        os.makedirs(path, mode=0o700, exist_ok=True)
        self._around("quarantine_dir", uuid, "after")
        return path

    def save_xml(self, directory: str, xml: str) -> None:
        uuid = os.path.basename(os.path.dirname(directory))
        self._watched("save_xml", uuid)
        domain = self._call("save_xml", uuid)
        with open(os.path.join(directory, "domain.xml"), "w", encoding="utf-8") as out:
            out.write(xml)
        self.host.quarantine[uuid] = Quarantined(xml, domain, None, directory)
        self._around("save_xml", uuid, "after")

    def keep_state(self, uuid: str, directory: str) -> Kept:
        self._watched("keep_state", uuid)
        kept = super().keep_state(uuid, directory)
        self._around("keep_state", uuid, "after")
        return kept

    def write_manifest(self, directory: str, manifest: Manifest) -> None:
        self._watched("write_manifest", manifest.uuid)
        super().write_manifest(directory, manifest)
        manifests.write(directory, manifest)
        self._around("write_manifest", manifest.uuid, "after")

    def undefine(self, uuid: str, directory: str) -> str:
        self._watched("undefine", uuid)
        domain = self.host.domains.get(uuid)
        before = (self.host.xml.get(uuid, ""), self.host.files.get(uuid))
        state = self.host.state.get(uuid, Kept())
        detail = super().undefine(uuid, directory)
        if domain is not None:
            self.reaped[uuid] = Reaped(before[0], before[1], domain, state)
        self.reaps_done += 1
        self._around("undefine", uuid, "after")
        return detail

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        self._watched("move_instance_files", uuid)
        if uuid not in self.host.quarantine:
            raise EffectError(f"no quarantine for {uuid}")
        result = super().move_instance_files(uuid, directory)
        if result.moved:
            os.makedirs(os.path.join(directory, "files"), exist_ok=True)
        self._around("move_instance_files", uuid, "after")
        return result

    def purge(self, uuid: str, directory: str) -> str:
        self._watched("purge", uuid)
        self.violations += self.purge_check(uuid, directory)
        saved = self.host.quarantine.get(uuid)
        detail = super().purge(uuid, directory)
        if saved is not None and saved.directory == directory:
            # NOTE: purged after retention: no longer expected to restore.
            self.reaped.pop(uuid, None)
        self.purges_done += 1
        self._around("purge", uuid, "after")
        return detail
