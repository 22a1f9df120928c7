"""The side effects the actuator may cause, behind one interface.

``LiveEffects`` (in ``live.py``) changes libvirt and the file system;
``RecordingEffects`` changes nothing and records what it would have done. The
actuator and everything before it run unchanged either way, so a dry run
decides exactly what a live run would.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from nova_orphans import exits
from nova_orphans.act.quarantine.manifest import Kept, Manifest
from nova_orphans.exceptions import NovaOrphansError


class EffectError(NovaOrphansError):
    """A side effect failed; the message says what and why, in one line."""

    exit_code = exits.ERROR


@dataclasses.dataclass(frozen=True)
class FilesResult:
    """What happened to the instance directory during a reap."""

    moved: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class SavedQuarantine:
    """A quarantine directory holding a guest's saved XML (found after a crash)."""

    stamp: str
    directory: str
    files_moved: bool


class Effects(Protocol):
    """Everything the actuator may change. Every method raises ``EffectError`` on failure."""

    def stop(self, uuid: str, timeout: float) -> str:
        """Shut the guest down gracefully; power it off after ``timeout`` s. Stays defined.

        Returns how it stopped, e.g. "shut down gracefully in 3 s" or "powered off after 30 s".
        """

    def domain_xml(self, uuid: str) -> str:
        """The persistent definition of the domain (inactive XML, with secure fields)."""

    def quarantine_dir(self, uuid: str, stamp: str) -> str:
        """Create (0700) and return the quarantine directory for this reap."""

    def save_xml(self, directory: str, xml: str) -> None:
        """Write the domain XML into the quarantine directory, durably."""

    def keep_state(self, uuid: str, directory: str) -> Kept:
        """Put aside in ``directory`` everything a restore needs besides the XML.

        NVRAM/TPM state, the managed-save image, every snapshot's and checkpoint's
        XML, and a copy (a hard link where possible) of every backing file the
        disks need outside the instance directory. Raises when any of it cannot
        be kept: the guest must then not be reaped (docs/design.md rule 16).
        """

    def write_manifest(self, directory: str, manifest: Manifest) -> None:
        """Write the quarantine directory's own manifest, durably."""

    def undefine(self, uuid: str, directory: str) -> str:
        """Undefine the domain, with its managed save, snapshot and checkpoint metadata.

        Refuses when the guest gained state that ``keep_state`` did not put into
        ``directory`` (a managed save, a snapshot). Falls back cleanly when the
        driver rejects a flag.
        """

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        """Move ``<instances_path>/<uuid>`` into ``directory`` when that is safe.

        Never through a symlink, never outside instances_path, never on a shared
        file system unless allowed. "Not safe" is not an error: ``moved`` is False
        and ``detail`` says why.
        """

    def saved_quarantines(self, uuid: str) -> list[SavedQuarantine]:
        """Every quarantine directory of ``uuid`` that holds its saved XML, oldest first."""

    def purge(self, uuid: str, directory: str) -> str:
        """Delete the quarantine directory ``<quarantine_root>/<uuid>/<stamp>`` for good.

        The only irreversible step. Nothing else is removed and no symlink is
        followed; a directory that is already gone is not an error.
        """

    def close(self) -> None:
        """Release what the effects hold (a libvirt connection); safe to call twice."""
