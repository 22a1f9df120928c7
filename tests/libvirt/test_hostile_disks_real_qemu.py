"""A tenant's disk is hostile input: the reap reads it on real qemu-img (docs/design.md rule 20).

A guest controls the bytes of its disks. A raw disk can carry a forged qcow2 header naming
any host file, a device or a network address as its "backing file" (the class of
OSSA-2024-001, CVE-2024-32498). The reap reads each disk as the domain XML declares it,
inspects it with oslo.utils' format inspector before qemu-img reads it, and keeps a backing
file only when it is a regular file under ``instances_path`` reached through no symlink;
anything else refuses the reap of that guest with a reason (docs/design.md rule 16) and
leaves nothing behind. The guests here are defined, never started; each is named
``hostile-disk-…`` and undefined afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import resource
import signal
import socket
import subprocess
import uuid as uuidlib
from collections.abc import Callable, Iterator
from xml.sax.saxutils import quoteattr

import libvirt
import pytest

from nova_orphans import virt
from nova_orphans.act import live
from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import manifest
from nova_orphans.fakes import libvirt_node as worlds

pytestmark = pytest.mark.libvirtd

STAMP = "20240501T120000Z"
#: What the tests let this process write to one file: a reap that copied a device or a
#: growing file without a bound fails here (EFBIG) instead of filling the file system.
WRITE_LIMIT = 64 << 20
BASE_NAME = "8d4c3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d"

Define = Callable[[str, tuple[str, ...]], str]


@pytest.fixture
def define(conn: libvirt.virConnect) -> Iterator[Define]:
    """Define a stopped guest with ``uuid`` and these disks; ours are undefined afterwards."""
    made: list[str] = []

    def _define(uuid: str, disks: tuple[str, ...]) -> str:
        made.append(uuid)
        name = f"hostile-disk-{uuidlib.uuid4().hex[:12]}"
        meta = worlds.nova_metadata(name=name)
        conn.defineXML(worlds.qemu_domain(uuid=uuid, name=name, metadata=meta, devices=disks))
        return uuid

    yield _define
    for uuid in made:
        with contextlib.suppress(libvirt.libvirtError):
            virt.undefine_with_fallback(conn.lookupByUUIDString(uuid))


@pytest.fixture
def instances(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "instances"
    (path / "_base").mkdir(parents=True)
    return path


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    """A host file outside ``instances_path``, standing in for /etc/shadow."""
    secret = tmp_path / "etc" / "shadow"
    secret.parent.mkdir()
    secret.write_bytes(b"root:$6$not-for-guests:19000:0:99999:7:::\n" * 100)
    return secret


@pytest.fixture
def quarantine(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "quarantine"


@pytest.fixture
def effects(
    qemu_system_uri: str, instances: pathlib.Path, quarantine: pathlib.Path
) -> Iterator[live.LiveEffects]:
    made = live.LiveEffects(qemu_system_uri, str(instances), str(quarantine))
    yield made
    made.close()


@pytest.fixture(autouse=True)
def bounded_writes() -> Iterator[None]:
    """Cap what one file may grow to while a test runs (a write past it fails, EFBIG)."""
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (WRITE_LIMIT, before[1]))
    yield
    resource.setrlimit(resource.RLIMIT_FSIZE, before)
    signal.signal(signal.SIGXFSZ, handler)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket no one may connect to."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def _disk(path: pathlib.Path, fmt: str, target: str = "vda") -> str:
    return (
        f"<disk type='file' device='disk'><driver name='qemu' type={quoteattr(fmt)}/>"
        f"<source file={quoteattr(str(path))}/><target dev={quoteattr(target)} bus='virtio'/>"
        "</disk>"
    )


def _qcow2(path: pathlib.Path, *options: str) -> pathlib.Path:
    """``qemu-img create -f qcow2`` with ``options``; the backing file is never opened (-u)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", *options, str(path), "16M"], check=True
    )
    return path


def _guest_dir(instances: pathlib.Path) -> tuple[str, pathlib.Path]:
    uuid = worlds.random_uuid()
    directory = instances / uuid
    directory.mkdir()
    return uuid, directory


def _files_in(root: pathlib.Path) -> list[pathlib.Path]:
    return [p for p in root.rglob("*") if not p.is_dir()] if root.exists() else []


def _bytes_used(root: pathlib.Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in _files_in(root))


def _assert_nothing_outside_in(quarantine: pathlib.Path, *outside: pathlib.Path) -> None:
    """No file in the quarantine is (a link to) one of ``outside``, or a device."""
    identities = {(f.stat().st_dev, f.stat().st_ino) for f in outside}
    for kept in _files_in(quarantine):
        found = kept.lstat()
        assert (found.st_dev, found.st_ino) not in identities, f"{kept} is a host file"
        assert kept.is_file() and not kept.is_symlink(), f"{kept} is not a regular file"


def _assert_refused_and_left_nothing(
    effects: live.LiveEffects,
    conn: libvirt.virConnect,
    uuid: str,
    quarantine: pathlib.Path,
    reason: str,
) -> None:
    """The reap refuses before the undefine, names why, and its directory holds no copy."""
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.save_xml(directory, effects.domain_xml(uuid))
    with pytest.raises(EffectError, match=reason) as refused:
        effects.keep_state(uuid, directory)
    assert str(refused.value).startswith(f"keep the state of {uuid}: ")
    assert str(refused.value).endswith("; not reaped")
    assert conn.lookupByUUIDString(uuid).isPersistent()  # not reaped
    assert sorted(os.listdir(directory)) == ["domain.xml"]  # no backing/, no partial copy
    assert _bytes_used(quarantine) < 1 << 20


def test_a_raw_disk_with_a_forged_qcow2_header_is_read_as_raw_and_links_no_host_file(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: the guest wrote a qcow2 header naming a host file into its disk."""
    uuid, directory = _guest_dir(instances)
    forged = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", str(outside))
    define(uuid, (_disk(forged, "raw"),))

    directory_q = effects.quarantine_dir(uuid, STAMP)
    kept = effects.keep_state(uuid, directory_q)
    assert kept.backing == ()  # raw has no backing file, whatever its bytes say
    _assert_nothing_outside_in(quarantine, outside)


def test_a_raw_disk_with_a_forged_header_naming_an_nbd_server_opens_no_connection(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    listener: socket.socket,
) -> None:
    """docs/design.md rule 20: read as raw, the address in the forged header is never dialled."""
    port = listener.getsockname()[1]
    uuid, directory = _guest_dir(instances)
    forged = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", f"nbd://127.0.0.1:{port}")
    define(uuid, (_disk(forged, "raw"),))

    assert effects.keep_state(uuid, effects.quarantine_dir(uuid, STAMP)).backing == ()
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_a_qcow2_disk_whose_backing_file_is_an_nbd_address_is_not_reaped_and_not_dialled(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    listener: socket.socket,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: a network backing file refuses the reap, and nothing connects."""
    port = listener.getsockname()[1]
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", f"nbd://127.0.0.1:{port}")
    define(uuid, (_disk(disk, "qcow2"),))

    _assert_refused_and_left_nothing(
        effects, conn, uuid, quarantine, r"backing file 'nbd://127\.0\.0\.1:\d+' .*not a file"
    )
    with pytest.raises(BlockingIOError):
        listener.accept()


@pytest.mark.parametrize("protocol", ['json:{"file.filename": "/etc/shadow"}', "http://x/y"])
def test_a_qcow2_disk_whose_backing_file_names_a_protocol_is_not_reaped(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    quarantine: pathlib.Path,
    protocol: str,
) -> None:
    """docs/design.md rule 20: ``json:`` and URLs are protocols, never files."""
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", protocol)
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"not a file")


def test_a_qcow2_disk_backed_by_dev_zero_is_not_reaped_and_copies_nothing(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: a device is no backing file; the disk does not fill up."""
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", "/dev/zero")
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(
        effects, conn, uuid, quarantine, r"backing file /dev/zero .*outside"
    )


def test_a_device_under_instances_path_is_no_backing_file(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: only a regular file is kept, wherever it lies."""
    device = instances / "_base" / BASE_NAME
    os.mknod(device, 0o600 | 0o020000, os.makedev(1, 5))  # a character device: /dev/zero's
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", str(device))
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"not a regular file")


def test_a_qcow2_disk_backed_by_a_host_file_outside_instances_path_is_not_reaped(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: a backing file outside ``instances_path`` is never linked."""
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-F", "raw", "-b", str(outside))
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"outside")
    _assert_nothing_outside_in(quarantine, outside)


def test_a_relative_backing_file_climbing_out_of_instances_path_is_not_reaped(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: ``../..`` is resolved as qemu-img would, then judged."""
    uuid, directory = _guest_dir(instances)
    climb = os.path.relpath(outside, directory)
    disk = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", climb)
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"outside")
    _assert_nothing_outside_in(quarantine, outside)


@pytest.mark.parametrize("where", ["base", "directory"])
def test_a_symlinked_base_is_not_followed(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
    where: str,
) -> None:
    """docs/design.md rule 20: a base reached through a symlink (file or directory) refuses."""
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(outside), "1M"], check=True)
    if where == "base":
        base = instances / "_base" / BASE_NAME
        base.symlink_to(outside)
    else:
        (instances / "_cache").symlink_to(outside.parent, target_is_directory=True)
        base = instances / "_cache" / outside.name
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-F", "raw", "-b", str(base))
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"is a symlink")
    _assert_nothing_outside_in(quarantine, outside)


def test_a_qcow2_disk_with_an_external_data_file_is_not_reaped(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: oslo.utils' inspector refuses a data-file (CVE-2024-32498)."""
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-o", f"data_file={outside},data_file_raw=on")
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"data_file")
    _assert_nothing_outside_in(quarantine, outside)


def test_a_disk_declared_qcow2_that_is_not_qcow2_is_not_reaped(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: the declared format must be what the inspector finds."""
    uuid, directory = _guest_dir(instances)
    (directory / "disk").write_bytes(b"\0" * 65536)
    define(uuid, (_disk(directory / "disk", "qcow2"),))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"not a qcow2 image")


def test_a_refused_second_disk_removes_what_the_first_had_kept(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: a refused reap leaves no copy behind, even of a good base."""
    base = instances / "_base" / BASE_NAME
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(base), "1M"], check=True)
    uuid, directory = _guest_dir(instances)
    good = _qcow2(directory / "disk", "-F", "raw", "-b", str(base))
    bad = _qcow2(directory / "disk.eph0", "-F", "raw", "-b", str(outside))
    define(uuid, (_disk(good, "qcow2"), _disk(bad, "qcow2", "vdb")))
    _assert_refused_and_left_nothing(effects, conn, uuid, quarantine, r"outside")
    assert base.stat().st_nlink == 1  # its link in the quarantine is gone


def test_a_legitimate_qcow2_overlay_on_a_raw_base_still_reaps_and_keeps_the_base(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rules 16 and 20: Nova's own layout passes every check."""
    base = instances / "_base" / BASE_NAME
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(base), "1M"], check=True)
    qcow2_base = _qcow2(instances / "_base" / "qcow2-image")
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-F", "raw", "-b", str(base))
    second = _qcow2(directory / "disk.eph0", "-F", "qcow2", "-b", str(qcow2_base))
    config = directory / "disk.config"
    config.write_bytes(b"\0" * 4096)
    define(
        uuid,
        (_disk(disk, "qcow2"), _disk(second, "qcow2", "vdb"), _disk(config, "raw", "vdc")),
    )

    directory_q = effects.quarantine_dir(uuid, STAMP)
    kept = effects.keep_state(uuid, directory_q)
    assert [(b.path, b.kept, b.how) for b in kept.backing] == [
        (str(base), f"0-{BASE_NAME}", "hard link"),
        (str(qcow2_base), "1-qcow2-image", "hard link"),
    ]
    for backing in kept.backing:
        linked = pathlib.Path(directory_q) / manifest.BACKING_DIR / backing.kept
        assert linked.stat().st_ino == pathlib.Path(backing.path).stat().st_ino


def _forget_backing_format(overlay: pathlib.Path) -> None:
    """Make ``overlay`` record no backing format, as overlays from before qemu 6.1 may.

    NOTE: the backing-format header extension's type is overwritten with one qemu
    does not know, which it skips.
    """
    data = overlay.read_bytes()
    at = data.index(bytes.fromhex("e2792aca"))
    overlay.write_bytes(data[:at] + bytes.fromhex("5eedf00d") + data[at + 4 :])


def test_a_base_without_a_recorded_format_is_kept_only_when_it_is_plain_raw(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: pathlib.Path,
    outside: pathlib.Path,
    quarantine: pathlib.Path,
) -> None:
    """docs/design.md rule 20: a base is never probed; read as raw it names nothing.

    A base that looks like qcow2 (a tenant's upload with a forged header) is refused.
    """
    plain = instances / "_base" / BASE_NAME
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(plain), "1M"], check=True)
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-F", "raw", "-b", str(plain))
    _forget_backing_format(disk)
    define(uuid, (_disk(disk, "qcow2"),))
    kept = effects.keep_state(uuid, effects.quarantine_dir(uuid, STAMP))
    assert [(b.path, b.how) for b in kept.backing] == [(str(plain), "hard link")]

    forged = _qcow2(instances / "_base" / "uploaded", "-u", "-F", "raw", "-b", str(outside))
    uuid, directory = _guest_dir(instances)
    disk = _qcow2(directory / "disk", "-u", "-F", "raw", "-b", str(forged))
    _forget_backing_format(disk)
    define(uuid, (_disk(disk, "qcow2"),))
    _assert_refused_and_left_nothing(
        effects, conn, uuid, quarantine / uuid, r"no recorded format and looks like qcow2"
    )
    _assert_nothing_outside_in(quarantine, outside)
