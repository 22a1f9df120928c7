"""The quarantine manifest: written and read back exactly, and every corruption refused."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib

import pytest

from nova_orphans.act.quarantine import manifest
from nova_orphans.act.quarantine.manifest import BackingFile, Kept, Manifest, ManifestError

UUID = "3f0c9a64-5d1e-4c2b-9a7f-0e1d2c3b4a59"
STAMP = "20240501T120000Z"
FULL = Manifest(
    UUID,
    "deleted",
    STAMP,
    "instance-0000002a",
    files_moved=True,
    leftovers=("tap0", "/dev/mapper/volume-1"),
    kept=Kept(
        nvram=True,
        tpm=False,
        managed_save=True,
        snapshots=("before", "after"),
        current_snapshot="after",
        checkpoints=("c1",),
        backing=(BackingFile("/var/lib/nova/instances/_base/abc", "0-abc", "hard link", 42),),
    ),
    undefined=True,
    undefining=True,
)


def _directory(tmp_path: pathlib.Path, uuid: str = UUID, stamp: str = STAMP) -> str:
    directory = tmp_path / "quarantine" / uuid / stamp
    directory.mkdir(parents=True)
    return str(directory)


def test_a_manifest_reads_back_exactly_as_written(tmp_path: pathlib.Path) -> None:
    directory = _directory(tmp_path)
    manifest.write(directory, FULL)
    assert manifest.read(directory) == FULL
    assert os.stat(os.path.join(directory, "manifest.json")).st_mode & 0o777 == 0o600


def test_holds_says_what_the_directory_holds() -> None:
    assert FULL.holds() == (
        "xml, files, managed-save, 2 snapshots, 1 checkpoint, nvram, backing chain (1 file)"
    )
    assert Manifest(UUID, "unknown", STAMP, "x").holds() == "xml"


def _corrupt(data: dict[str, object], path: str, value: object) -> dict[str, object]:
    """``data`` with the field at dotted ``path`` set to ``value`` (deleted when ...)."""
    copy = json.loads(json.dumps(data))
    node = copy
    *parents, last = path.split(".")
    for part in parents:
        node = node[part] if not part.isdigit() else node[int(part)]
    if value is Ellipsis:
        del node[last]
    else:
        node[last] = value
    return copy


CORRUPTIONS = [
    ("another version", "version", 99),
    ("no uuid", "uuid", ...),
    ("a uuid that is not one", "uuid", "../../etc"),
    ("a stamp that is not a time", "reaped_at", "yesterday"),
    ("a kind that does not exist", "kind", "obliterated"),
    ("a flag that is text", "files_moved", "yes"),
    ("an undefine mark that is text", "undefining", "maybe"),
    ("a backing copy outside the directory", "kept.backing.0.kept", "../../etc/shadow"),
    ("a backing path that is a number", "kept.backing.0.path", 7),
    # docs/design.md rule 9: restore would create the base at whatever path the manifest names.
    ("a relative backing path", "kept.backing.0.path", "_base/abc"),
    ("a backing path climbing out", "kept.backing.0.path", "/var/lib/nova/../../etc/x"),
    ("snapshots that are not a list", "kept.snapshots", 3),
    ("an unknown field", "surprise", 1),
]


@pytest.mark.parametrize(
    ("path", "value"), [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS]
)
def test_a_corrupt_manifest_is_refused_in_one_line(
    tmp_path: pathlib.Path, path: str, value: object
) -> None:
    directory = _directory(tmp_path)
    data = json.loads(manifest.to_json(FULL))
    (pathlib.Path(directory) / "manifest.json").write_text(json.dumps(_corrupt(data, path, value)))
    with pytest.raises(ManifestError, match="corrupt manifest") as raised:
        manifest.read(directory)
    assert "\n" not in str(raised.value)


def test_text_that_is_not_json_is_a_corrupt_manifest(tmp_path: pathlib.Path) -> None:
    directory = _directory(tmp_path)
    (pathlib.Path(directory) / "manifest.json").write_text('{"version": 1, "uuid": ')
    with pytest.raises(ManifestError, match="corrupt manifest"):
        manifest.read(directory)


def test_a_manifest_in_another_entrys_directory_is_refused(tmp_path: pathlib.Path) -> None:
    directory = _directory(tmp_path, stamp="20240601T000000Z")
    manifest.write(directory, FULL)
    with pytest.raises(ManifestError, match=r"describes .*/20240501T120000Z, lies in"):
        manifest.read(directory)


def test_a_directory_without_a_manifest_says_so(tmp_path: pathlib.Path) -> None:
    directory = _directory(tmp_path)
    with pytest.raises(ManifestError, match=r"has no manifest\.json"):
        manifest.read(directory)


def test_a_symlinked_manifest_is_not_followed(tmp_path: pathlib.Path) -> None:
    directory = _directory(tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(manifest.to_json(FULL))
    os.symlink(elsewhere, os.path.join(directory, "manifest.json"))
    with pytest.raises(ManifestError, match="cannot read"):
        manifest.read(directory)


def test_scan_finds_every_entry_with_its_manifest_or_its_problem(tmp_path: pathlib.Path) -> None:
    good = _directory(tmp_path)
    manifest.write(good, FULL)
    bare = _directory(tmp_path, stamp="20240502T000000Z")
    (tmp_path / "quarantine" / "not-a-uuid").mkdir()
    found = manifest.scan(str(tmp_path / "quarantine"))
    assert [(f.directory, f.manifest, f.problem) for f in found] == [
        (good, FULL, None),
        (bare, None, f"{bare} has no manifest.json"),
    ]
    assert manifest.scan(str(tmp_path / "missing")) == []


def test_a_manifest_is_equal_after_replace_round_trip(tmp_path: pathlib.Path) -> None:
    directory = _directory(tmp_path)
    restored = dataclasses.replace(FULL, restored_at=STAMP, restore_state="restored")
    manifest.write(directory, restored)
    assert manifest.read(directory) == restored


def test_a_manifest_written_before_the_undefine_mark_reads_as_a_mere_copy(
    tmp_path: pathlib.Path,
) -> None:
    """An older version's manifest has no ``undefining``: its word "not undefined" stands."""
    directory = _directory(tmp_path)
    data = json.loads(manifest.to_json(dataclasses.replace(FULL, undefined=False)))
    del data["undefining"]
    (pathlib.Path(directory) / "manifest.json").write_text(json.dumps(data))
    saved = manifest.read(directory)
    assert not saved.undefining and not saved.possibly_undefined
    assert dataclasses.replace(saved, undefining=True).possibly_undefined
