"""What a reap may write when it keeps a file: bounded, and nothing left on refusal.

docs/design.md rule 20: a copy (across file systems) writes at most the file's size, only
when it fits beside a reserve of free space, and only of a regular file.
"""

from __future__ import annotations

import errno
import os
import pathlib

import pytest

from nova_orphans.act import images
from nova_orphans.act.effects import EffectError


def _no_hard_links(monkeypatch: pytest.MonkeyPatch) -> None:
    def cross_device(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(images.os, "link", cross_device)


def test_a_file_on_the_same_file_system_is_hard_linked(tmp_path: pathlib.Path) -> None:
    base = tmp_path / "base"
    base.write_bytes(b"image")
    assert images.keep_file(str(base), str(tmp_path / "kept")) == "hard link"
    assert (tmp_path / "kept").stat().st_ino == base.stat().st_ino


def test_a_copy_is_byte_identical_with_the_same_size_and_time(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_hard_links(monkeypatch)
    base = tmp_path / "base"
    base.write_bytes(os.urandom(3 << 20))
    os.utime(base, ns=(1_700_000_000_000_000_000, 1_700_000_000_123_456_789))
    assert images.keep_file(str(base), str(tmp_path / "kept")) == "copy"
    kept = tmp_path / "kept"
    assert kept.read_bytes() == base.read_bytes()
    assert kept.stat().st_mtime_ns == base.stat().st_mtime_ns


def test_a_copy_that_would_not_fit_is_refused_and_writes_nothing(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_hard_links(monkeypatch)
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    monkeypatch.setattr(images, "FREE_RESERVE", free)  # nothing may be written
    base = tmp_path / "base"
    base.write_bytes(b"x" * 4096)
    with pytest.raises(EffectError, match=r"would leave less than .* free"):
        images.keep_file(str(base), str(tmp_path / "kept"))
    assert not (tmp_path / "kept").exists()


@pytest.mark.parametrize("source", ["/dev/zero", "fifo", "symlink"])
def test_only_a_regular_file_is_kept(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    _no_hard_links(monkeypatch)
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
        source = str(tmp_path / "fifo")
    elif source == "symlink":
        (tmp_path / "real").write_bytes(b"x")
        (tmp_path / "symlink").symlink_to(tmp_path / "real")
        source = str(tmp_path / "symlink")
    with pytest.raises(EffectError, match="not kept"):
        images.keep_file(source, str(tmp_path / "kept"))
    assert not os.path.lexists(tmp_path / "kept")


def test_a_file_that_grows_while_it_is_copied_leaves_no_partial_copy(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_hard_links(monkeypatch)
    base = tmp_path / "base"
    base.write_bytes(b"x" * 4096)
    real_fstat = os.fstat

    def smaller(fd: int) -> os.stat_result:  # the size seen at open; the file grew since
        found = real_fstat(fd)
        fields = list(found)
        fields[6] = 1024
        return os.stat_result(fields)

    monkeypatch.setattr(images.os, "fstat", smaller)
    with pytest.raises(EffectError, match="grew while it was copied"):
        images.keep_file(str(base), str(tmp_path / "kept"))
    assert not (tmp_path / "kept").exists()
