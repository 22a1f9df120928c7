"""Effects for a dry run: change nothing, remember every call, answer plausibly."""

from __future__ import annotations

import os

from nova_orphans import virt
from nova_orphans.act import live
from nova_orphans.act.effects import EffectError, FilesResult, SavedQuarantine
from nova_orphans.act.quarantine import files, paths
from nova_orphans.act.quarantine.manifest import Kept, Manifest


class RecordingEffects:
    """``Effects`` that record ``(method, args)`` in ``calls`` and change nothing.

    With a ``uri``, ``domain_xml`` reads the real XML through a read-only
    connection; without one it returns "".
    """

    def __init__(
        self,
        uri: str | None = None,
        instances_path: str = "",
        quarantine_root: str = "",
    ) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self._uri = uri
        self._instances_path = instances_path
        self._quarantine_root = quarantine_root

    def stop(self, uuid: str, timeout: float) -> str:
        """Record; say what a live run would do."""
        self.calls.append(("stop", (uuid, timeout)))
        return f"would stop (graceful shutdown, power off after {timeout:g} s)"

    def domain_xml(self, uuid: str) -> str:
        """Record; the inactive XML read through a read-only connection, or ""."""
        self.calls.append(("domain_xml", (uuid,)))
        if not self._uri:
            return ""
        host = live.open_connection(self._uri, read_only=True)
        try:
            # NOTE: a read-only connection may not ask for secure fields.
            return host.get_guest(uuid).get_definition(secure=False)
        except virt.Error as err:
            raise EffectError(f"read the XML of {uuid}: {err.reason}") from err
        finally:
            host.close()

    def quarantine_dir(self, uuid: str, stamp: str) -> str:
        """Record; the directory a live run would create (nothing is created)."""
        self.calls.append(("quarantine_dir", (uuid, stamp)))
        return os.path.join(self._quarantine_root, uuid, stamp)

    def save_xml(self, directory: str, xml: str) -> None:
        """Record; write nothing."""
        self.calls.append(("save_xml", (directory, xml)))

    def keep_state(self, uuid: str, directory: str) -> Kept:
        """Record; keep nothing (a live run keeps managed save, snapshots, backing chain)."""
        self.calls.append(("keep_state", (uuid, directory)))
        return Kept()

    def write_manifest(self, directory: str, manifest: Manifest) -> None:
        """Record; write nothing."""
        self.calls.append(("write_manifest", (directory, manifest)))

    def undefine(self, uuid: str, directory: str) -> str:
        """Record; say what a live run would do."""
        self.calls.append(("undefine", (uuid, directory)))
        return "would undefine (after keeping its state)"

    def purge(self, uuid: str, directory: str) -> str:
        """Record; delete nothing."""
        self.calls.append(("purge", (uuid, directory)))
        return f"would delete {directory}"

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        """Record; say where a live run would move the files (unless unsafe)."""
        self.calls.append(("move_instance_files", (uuid, directory)))
        if not paths.is_canonical_uuid(uuid):
            return FilesResult(False, f"dry run: {uuid!r} is not a canonical UUID")
        source = os.path.join(self._instances_path, uuid)
        target = files.files_dir(directory)
        return FilesResult(False, f"dry run: would move {source} to {target} if safe")

    def saved_quarantines(self, uuid: str) -> list[SavedQuarantine]:
        """A dry run saves nothing."""
        return []

    def close(self) -> None:
        """Nothing to release."""
