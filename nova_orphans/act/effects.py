"""The side effects the actuator may cause, behind one interface.

``LiveEffects`` (in ``live.py``) changes libvirt and the file system;
``RecordingEffects`` changes nothing and records what it would have done. The
actuator and everything before it run unchanged either way, so a dry run
decides exactly what a live run would.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol


class EffectError(Exception):
    """A side effect failed; the message says what and why, in one line."""


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

    def undefine(self, uuid: str, directory: str) -> str:
        """Undefine the domain, with its managed save, snapshot and checkpoint metadata.

        NVRAM/TPM state files are copied into ``directory`` before they are kept
        or removed. Falls back cleanly when the driver rejects a flag.
        """

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        """Move ``<instances_path>/<uuid>`` into ``directory`` when that is safe.

        Never through a symlink, never outside instances_path, never on a shared
        file system unless allowed. "Not safe" is not an error: ``moved`` is False
        and ``detail`` says why.
        """

    def saved_quarantines(self, uuid: str) -> list[SavedQuarantine]:
        """Every quarantine directory of ``uuid`` that holds its saved XML, oldest first."""

    def close(self) -> None:
        """Release what the effects hold (a libvirt connection); safe to call twice."""
