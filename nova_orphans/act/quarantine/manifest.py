"""The manifest each quarantine directory carries: what the reap kept, and where.

The journal is not the only record of a reap: ``manifest.json`` in
``<quarantine_root>/<uuid>/<stamp>`` says whose guest it is, when and why it was
reaped, what the directory holds (XML, instance files, managed-save image,
snapshots, checkpoints, NVRAM/TPM state) and which backing files the guest's disks
need and where copies of them are kept. ``restore`` and the retention purge work
from it when the journal is lost or does not know the entry.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from typing import Any

from nova_orphans import exits
from nova_orphans.act.quarantine import paths
from nova_orphans.exceptions import NovaOrphansError, one_line
from nova_orphans.model import Kind
from nova_orphans.record.entries import STAMP_FORMAT

MANIFEST_FILE = "manifest.json"
VERSION = 1
#: Names inside a quarantine directory.
XML_FILE, NVRAM_FILE, TPM_DIR, FILES_DIR = "domain.xml", "nvram", "swtpm", "files"
MANAGED_SAVE_FILE, SNAPSHOTS_DIR, CHECKPOINTS_DIR, BACKING_DIR = (
    "managed.save",
    "snapshots",
    "checkpoints",
    "backing",
)


class ManifestError(NovaOrphansError):
    """A manifest is missing, unreadable or does not describe its directory (one line)."""

    exit_code = exits.ERROR


@dataclasses.dataclass(frozen=True)
class BackingFile:
    """One backing file a disk needs, and the copy the quarantine keeps of it."""

    path: str  # where the disk's chain names it
    kept: str  # its name inside ``backing/``
    how: str  # "hard link" | "copy"
    size: int


@dataclasses.dataclass(frozen=True)
class Kept:
    """What a reap put aside besides the domain XML, so that a restore is complete."""

    nvram: bool = False
    tpm: bool = False
    managed_save: bool = False
    #: Snapshot names, every parent before its children; their XML is ``snapshots/<i>.xml``.
    snapshots: tuple[str, ...] = ()
    current_snapshot: str | None = None
    #: Checkpoint names, parents first; their XML is ``checkpoints/<i>.xml``.
    checkpoints: tuple[str, ...] = ()
    backing: tuple[BackingFile, ...] = ()


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A quarantine directory's own record of its reap."""

    uuid: str
    kind: str
    reaped_at: str
    name: str
    files_moved: bool = False
    leftovers: tuple[str, ...] = ()
    kept: Kept = Kept()
    #: False until the domain is undefined: before that the directory is only a copy.
    undefined: bool = False
    #: Set by restore: when the guest was defined again, and how that ended.
    restored_at: str | None = None
    restore_state: str | None = None
    #: Set just before the undefine (the intent): from then on the domain may be gone, so a
    #: directory not marked ``undefined`` may still hold the only definition of the guest.
    #: Cleared again only when the undefine failed and the domain is still defined.
    undefining: bool = False

    @property
    def possibly_undefined(self) -> bool:
        """Whether the guest may be undefined: a quarantine entry, not a mere copy."""
        return self.undefined or self.undefining

    @property
    def reaped_time(self) -> datetime.datetime:
        """``reaped_at`` as a UTC time."""
        parsed = datetime.datetime.strptime(self.reaped_at, STAMP_FORMAT)
        return parsed.replace(tzinfo=datetime.timezone.utc)

    def holds(self) -> str:
        """What the directory holds, in the operator's words."""
        kept = self.kept
        parts = ["xml"]
        if self.files_moved:
            parts.append("files")
        if kept.managed_save:
            parts.append("managed-save")
        if kept.snapshots:
            parts.append(f"{len(kept.snapshots)} snapshot{'s' * (len(kept.snapshots) != 1)}")
        if kept.checkpoints:
            parts.append(f"{len(kept.checkpoints)} checkpoint{'s' * (len(kept.checkpoints) != 1)}")
        if kept.nvram:
            parts.append("nvram")
        if kept.tpm:
            parts.append("tpm")
        if kept.backing:
            files = len(kept.backing)
            parts.append(f"backing chain ({files} file{'s' * (files != 1)})")
        return ", ".join(parts)


def to_json(manifest: Manifest) -> str:
    """The manifest as JSON text."""
    return json.dumps({"version": VERSION, **dataclasses.asdict(manifest)}, indent=2) + "\n"


def from_json(text: str, where: str) -> Manifest:
    """Parse and check a manifest; ``ManifestError`` names ``where`` and what is wrong."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.pop("version", None) != VERSION:
            raise ValueError(f"not a version {VERSION} manifest")
        kept: dict[str, Any] = dict(data.pop("kept"))
        kept["backing"] = tuple(BackingFile(**b) for b in kept["backing"])
        for listed in ("snapshots", "checkpoints"):
            kept[listed] = tuple(kept[listed])
        data["leftovers"] = tuple(data["leftovers"])
        manifest = Manifest(**data, kept=Kept(**kept))
        _check(manifest)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ManifestError(f"{where}: corrupt manifest ({_reason(err)})") from err
    return manifest


def _check(manifest: Manifest) -> None:
    """Raise ValueError for a field of the wrong type or a value no reap writes."""
    texts = [manifest.uuid, manifest.kind, manifest.reaped_at, manifest.name]
    texts += list(manifest.leftovers) + list(manifest.kept.snapshots)
    texts += list(manifest.kept.checkpoints)
    for backing in manifest.kept.backing:
        texts += [backing.path, backing.kept, backing.how]
    if not all(isinstance(t, str) for t in texts):
        raise ValueError("a field that must be text is not")
    flags = [manifest.files_moved, manifest.undefined, manifest.undefining]
    flags += [manifest.kept.nvram, manifest.kept.tpm]
    if not all(isinstance(f, bool) for f in [*flags, manifest.kept.managed_save]):
        raise ValueError("a field that must be true or false is not")
    if not paths.is_canonical_uuid(manifest.uuid):
        raise ValueError(f"uuid {manifest.uuid!r} is not a canonical UUID")
    manifest.reaped_time  # noqa: B018 -- raises ValueError on a bad stamp
    names = [b.kept for b in manifest.kept.backing]
    for name in names:
        if os.sep in name or name in ("", ".", ".."):
            raise ValueError(f"backing file name {name!r}")
    for backing in manifest.kept.backing:
        # NOTE: restore puts a missing base back at this path: only the absolute,
        # normalized path a reap records (``backing_chain``) is accepted.
        if not os.path.isabs(backing.path) or os.path.normpath(backing.path) != backing.path:
            raise ValueError(f"backing file path {backing.path!r}")
    Kind(manifest.kind)  # raises ValueError for a kind that does not exist


def read(directory: str) -> Manifest:
    """The manifest of a quarantine directory, checked against the directory's place.

    ``<root>/<uuid>/<stamp>/manifest.json`` must name that UUID and stamp.
    """
    path = os.path.join(directory, MANIFEST_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as saved:
            text = saved.read()
    except FileNotFoundError:
        raise ManifestError(f"{directory} has no {MANIFEST_FILE}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"cannot read {path}: {_reason(err)}") from err
    manifest = from_json(text, path)
    place = (os.path.basename(os.path.dirname(directory)), os.path.basename(directory))
    if place != (manifest.uuid, manifest.reaped_at):
        raise ManifestError(
            f"{path}: corrupt manifest (describes {manifest.uuid}/{manifest.reaped_at}, "
            f"lies in {'/'.join(place)})"
        )
    return manifest


def write(directory: str, manifest: Manifest) -> None:
    """Write ``manifest.json`` (0600) into ``directory``, durably."""
    paths.write_durably(os.path.join(directory, MANIFEST_FILE), to_json(manifest))


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError):
        return paths.os_reason(err)
    return one_line(err) or type(err).__name__


@dataclasses.dataclass(frozen=True)
class Found:
    """A quarantine directory found on disk: its manifest, or why it has no usable one."""

    uuid: str
    stamp: str
    directory: str
    manifest: Manifest | None
    problem: str | None


def scan(quarantine_root: str) -> list[Found]:
    """Every ``<uuid>/<stamp>`` directory under ``quarantine_root``, oldest first per UUID.

    Read-only; no symlink is followed (a symlinked entry is reported as a problem).
    """
    root = os.path.abspath(quarantine_root)
    if not os.path.isdir(root) or paths.first_symlink(root):
        return []
    found = []
    for uuid in sorted(os.listdir(root)):
        base = os.path.join(root, uuid)
        if not paths.is_canonical_uuid(uuid) or paths.path_refusal(root, base):
            continue
        for stamp in sorted(os.listdir(base)):
            directory = os.path.join(base, stamp)
            refusal = paths.path_refusal(base, directory)
            if refusal:
                found.append(Found(uuid, stamp, directory, None, refusal))
                continue
            try:
                found.append(Found(uuid, stamp, directory, read(directory), None))
            except ManifestError as err:
                found.append(Found(uuid, stamp, directory, None, str(err)))
    return found
