"""Moving an instance directory into quarantine, and back: every refusal, the happy path.

The file half of docs/design.md rule 7: only <instances_path>/<uuid> of a canonical UUID,
never through a symlink, never across or off a non-local file system, always restorable.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import pathlib
import stat
from collections.abc import Callable

import pytest

from nova_orphans import model
from nova_orphans.act import live
from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import files, paths
from nova_orphans.classify import remnants
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.entries import QuarantineEntry

UUID = "0c5e7e32-8f0e-4d4e-9a57-3b1f1c2d0a01"
STAMP = "20240501T120000Z"
LOCAL_MOUNTS = "/dev/sda1 / ext4 rw,relatime 0 0\n"


@dataclasses.dataclass
class Host:
    """A fake compute host under tmp_path: instances, quarantine, mounts file."""

    root: pathlib.Path
    instances: pathlib.Path
    quarantine: pathlib.Path
    mounts: pathlib.Path

    def effects(
        self, *, allow_shared_storage: bool = False, instances: str = ""
    ) -> live.LiveEffects:
        return live.LiveEffects(
            "test:///default",
            instances or str(self.instances),
            str(self.quarantine),
            allow_shared_storage,
            mounts_file=str(self.mounts),
        )

    def instance_dir(self, uuid: str = UUID) -> pathlib.Path:
        directory = self.instances / uuid
        directory.mkdir()
        (directory / "disk").write_bytes(os.urandom(4096))
        (directory / "disk.info").write_text('{"disk": "qcow2"}')
        return directory

    def mount(self, fstype: str, where: pathlib.Path | None = None) -> None:
        """Pretend ``where`` (default: instances_path) is a mount of ``fstype``."""
        line = f"server:/export {where or self.instances} {fstype} rw 0 0\n"
        self.mounts.write_text(LOCAL_MOUNTS + line)


@pytest.fixture
def host(tmp_path: pathlib.Path) -> Host:
    made = Host(tmp_path, tmp_path / "instances", tmp_path / "quarantine", tmp_path / "mounts")
    made.instances.mkdir()
    made.mounts.write_text(LOCAL_MOUNTS)
    return made


def _tree(directory: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


# --- refusals ------------------------------------------------------------------------


def _missing(host: Host) -> None:
    """Nothing to set up: there is no instance directory."""


def _symlinked_dir(host: Host) -> None:
    elsewhere = host.root / "elsewhere"
    elsewhere.mkdir()
    (host.instances / UUID).symlink_to(elsewhere)


def _dangling_symlink(host: Host) -> None:
    (host.instances / UUID).symlink_to(host.root / "nowhere")


def _plain_file(host: Host) -> None:
    (host.instances / UUID).write_text("not a directory")


def _mounted(fstype: str) -> Callable[[Host], None]:
    def setup(host: Host) -> None:
        host.instance_dir()
        host.mount(fstype)

    return setup


def _mountinfo_cephfs(host: Host) -> None:
    host.instance_dir()
    host.mounts.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"99 22 0:50 / {host.instances} rw,relatime shared:7 - ceph 10.0.0.1:/ rw,name=nova\n"
    )


def _unreadable_mounts(host: Host) -> None:
    host.instance_dir()
    host.mounts.unlink()


REFUSALS = [
    ("a missing instance directory is not moved", _missing, "does not exist"),
    ("a symlinked instance directory is not followed", _symlinked_dir, "is a symlink"),
    ("a dangling symlink is not followed", _dangling_symlink, "is a symlink"),
    ("a plain file named like the instance is left", _plain_file, "is not a directory"),
    ("files on NFS are shared storage", _mounted("nfs"), "on nfs"),
    ("files on NFSv4 are shared storage", _mounted("nfs4"), "on nfs4"),
    ("files on CephFS are shared storage", _mounted("ceph"), "on ceph"),
    ("files on ceph-fuse are shared storage", _mounted("fuse.ceph-fuse"), "on fuse.ceph-fuse"),
    ("files on GlusterFS are shared storage", _mounted("fuse.glusterfs"), "on fuse.glusterfs"),
    ("files on Lustre are shared storage", _mounted("lustre"), "on lustre"),
    ("files on GPFS are shared storage", _mounted("gpfs"), "on gpfs"),
    ("files on SMB are shared storage", _mounted("cifs"), "on cifs"),
    ("files on virtiofs are shared storage", _mounted("virtiofs"), "on virtiofs"),
    ("any FUSE file system counts as shared", _mounted("fuse.sshfs"), "on fuse.sshfs"),
    ("files on WekaFS are shared storage", _mounted("wekafs"), "on wekafs"),
    ("files on VxFS/CFS are shared storage", _mounted("vxfs"), "on vxfs"),
    ("files on StorNext are shared storage", _mounted("cvfs"), "on cvfs"),
    ("files on Oracle ACFS are shared storage", _mounted("acfs"), "on acfs"),
    ("a file system type nobody listed is shared storage", _mounted("newfs"), "on newfs"),
    ("mountinfo format is understood", _mountinfo_cephfs, "on ceph"),
    ("an unreadable mount table is not guessed local", _unreadable_mounts, "cannot tell"),
]


@pytest.mark.parametrize(
    ("setup", "expected"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_unsafe_instance_directory_is_not_moved(
    host: Host, setup: Callable[[Host], None], expected: str
) -> None:
    setup(host)
    before = sorted(os.listdir(host.instances))
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)
    result = effects.move_instance_files(UUID, directory)
    assert not result.moved
    assert expected in result.detail
    assert "\n" not in result.detail
    assert sorted(os.listdir(host.instances)) == before
    assert os.listdir(directory) == []


GARBAGE_UUIDS = [
    ("parent directory", f"../{UUID}"),
    ("nested path", f"{UUID}/../{UUID}"),
    ("upper case", UUID.upper()),
    ("braces", "{" + UUID + "}"),
    ("no hyphens", UUID.replace("-", "")),
    ("empty", ""),
    ("dot", "."),
    ("absolute path", "/etc"),
]


@pytest.mark.parametrize(
    "garbage", [c[1] for c in GARBAGE_UUIDS], ids=[c[0] for c in GARBAGE_UUIDS]
)
def test_no_path_is_built_from_a_garbage_uuid(host: Host, garbage: str) -> None:
    host.instance_dir()
    effects = host.effects()
    result = effects.move_instance_files(garbage, effects.quarantine_dir(UUID, STAMP))
    assert not result.moved
    assert "not a canonical UUID" in result.detail
    assert (host.instances / UUID / "disk").is_file()


def test_symlinked_component_of_instances_path_is_not_followed(host: Host) -> None:
    (host.root / "link").symlink_to(host.root)
    host.instance_dir()
    effects = host.effects(instances=str(host.root / "link" / "instances"))
    result = effects.move_instance_files(UUID, effects.quarantine_dir(UUID, STAMP))
    assert not result.moved
    assert f"{host.root / 'link'} is a symlink" in result.detail
    assert (host.instances / UUID / "disk").is_file()


def test_path_outside_instances_path_through_dotdot_is_refused(host: Host) -> None:
    outside = host.root / "outside" / UUID
    outside.mkdir(parents=True)
    sneaky = os.path.join(str(host.instances), "..", "outside", UUID)
    refusal = paths.path_refusal(str(host.instances), sneaky)
    assert refusal == f"{outside} is outside {host.instances}"


def test_instances_path_itself_is_never_a_target(host: Host) -> None:
    refusal = paths.path_refusal(str(host.instances), str(host.instances))
    assert refusal is not None and "itself" in refusal


@pytest.mark.parametrize("fstype", ["nfs4", "ceph", "fuse.glusterfs", "lustre", "wekafs", "newfs"])
def test_shared_storage_is_moved_when_explicitly_allowed(host: Host, fstype: str) -> None:
    host.instance_dir()
    host.mount(fstype)
    effects = host.effects(allow_shared_storage=True)
    assert effects.move_instance_files(UUID, effects.quarantine_dir(UUID, STAMP)).moved


LOCAL_TYPES = [
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "f2fs", "jfs", "reiserfs",
    "bcachefs", "overlay",
]  # fmt: skip


@pytest.mark.parametrize("fstype", LOCAL_TYPES)
def test_files_on_a_local_file_system_are_moved(host: Host, fstype: str) -> None:
    host.instance_dir()
    host.mount(fstype)
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)
    result = effects.move_instance_files(UUID, directory)
    assert result.moved, result.detail
    assert not (host.instances / UUID).exists()


def test_a_local_mount_below_a_shared_one_is_local(host: Host) -> None:
    host.instance_dir()
    host.mounts.write_text(
        LOCAL_MOUNTS + f"srv:/x {host.root} nfs4 rw 0 0\n/dev/sdb1 {host.instances} xfs rw 0 0\n"
    )
    effects = host.effects()
    assert effects.move_instance_files(UUID, effects.quarantine_dir(UUID, STAMP)).moved


def test_mount_point_with_a_space_is_unescaped() -> None:
    mounts = LOCAL_MOUNTS + "srv:/x /srv/nova\\040instances nfs rw 0 0\n"
    assert paths.mount_of("/srv/nova instances/abc", mounts) == ("/srv/nova instances", "nfs")
    assert paths.mount_of("/srv/nova instancesX", mounts) == ("/", "ext4")


def test_other_file_system_is_refused_rather_than_copied(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.instance_dir()
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)

    def cross_device(src: str, dst: str) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link", src)

    monkeypatch.setattr(os, "rename", cross_device)
    result = effects.move_instance_files(UUID, directory)
    assert not result.moved
    assert "different file systems" in result.detail
    assert "not copied" in result.detail


def test_directory_outside_the_quarantine_is_refused(host: Host) -> None:
    host.instance_dir()
    with pytest.raises(EffectError, match="outside"):
        host.effects().move_instance_files(UUID, str(host.root))


# --- the happy path and back ---------------------------------------------------------


def _entry(directory: str, files_moved: bool = True) -> QuarantineEntry:
    return QuarantineEntry(UUID, STAMP, "deleted", directory, files_moved, [])


def test_instance_directory_moves_into_quarantine_and_back_byte_identical(host: Host) -> None:
    original = _tree(host.instance_dir())
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)
    result = effects.move_instance_files(UUID, directory)
    assert result.moved, result.detail
    assert not (host.instances / UUID).exists()
    assert _tree(pathlib.Path(directory) / "files") == original

    detail = files.move_files_back(_entry(directory), str(host.instances))
    assert detail == f"moved the instance directory back to {host.instances / UUID}"
    assert _tree(host.instances / UUID) == original
    assert not (pathlib.Path(directory) / "files").exists()


def test_restoring_files_never_overwrites_an_instance_directory(host: Host) -> None:
    host.instance_dir()
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)
    assert effects.move_instance_files(UUID, directory).moved
    (host.instances / UUID).mkdir()
    with pytest.raises(EffectError, match="exists; not overwritten"):
        files.move_files_back(_entry(directory), str(host.instances))
    assert (pathlib.Path(directory) / "files" / "disk").is_file()


# --- the quarantine directory --------------------------------------------------------


def _mode(path: str | pathlib.Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_quarantine_directories_are_0700_whatever_the_umask(host: Host) -> None:
    host.quarantine.mkdir(mode=0o755)
    old = os.umask(0o022)
    try:
        directory = host.effects().quarantine_dir(UUID, STAMP)
    finally:
        os.umask(old)
    assert directory == str(host.quarantine / UUID / STAMP)
    for path in (host.quarantine, host.quarantine / UUID, directory):
        assert _mode(path) == 0o700, path


def test_domain_xml_is_saved_0600_and_complete(host: Host) -> None:
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)
    effects.save_xml(directory, "<domain><uuid>x</uuid></domain>")
    saved = pathlib.Path(directory) / "domain.xml"
    assert saved.read_text() == "<domain><uuid>x</uuid></domain>"
    assert _mode(saved) == 0o600
    assert os.listdir(directory) == ["domain.xml"]


QUARANTINE_REFUSALS = [
    ("the root is a plain file", "file", UUID, STAMP, "not a writable directory"),
    ("the root is a symlink", "symlink", UUID, STAMP, "is a symlink"),
    ("the UUID is garbage", "", "../../etc", STAMP, "not a canonical UUID"),
    ("the stamp climbs out", "", UUID, "../x", "not a usable time stamp"),
    ("the stamp is empty", "", UUID, "", "not a usable time stamp"),
]


@pytest.mark.parametrize(
    ("root", "uuid", "stamp", "expected"),
    [c[1:] for c in QUARANTINE_REFUSALS],
    ids=[c[0] for c in QUARANTINE_REFUSALS],
)
def test_unusable_quarantine_is_refused(
    host: Host, root: str, uuid: str, stamp: str, expected: str
) -> None:
    if root == "file":
        host.quarantine.write_text("")
    elif root == "symlink":
        (host.root / "real-quarantine").mkdir()
        host.quarantine.symlink_to(host.root / "real-quarantine")
    with pytest.raises(EffectError, match=expected):
        host.effects().quarantine_dir(uuid, stamp)


def test_a_used_quarantine_directory_is_not_reused(host: Host) -> None:
    effects = host.effects()
    directory = effects.quarantine_dir(UUID, STAMP)
    effects.save_xml(directory, "<domain/>")
    with pytest.raises(EffectError, match="already in use"):
        effects.quarantine_dir(UUID, STAMP)


# --- purge -----------------------------------------------------------------------------


def test_purge_removes_the_entry_directory_and_nothing_else(host: Host) -> None:
    effects = host.effects()
    keep = effects.quarantine_dir(UUID, "20240101T000000Z")
    directory = effects.quarantine_dir(UUID, STAMP)
    effects.save_xml(directory, "<domain/>")
    assert host.effects().purge(UUID, directory) == f"deleted {directory}"
    assert not os.path.exists(directory)
    assert os.path.isdir(keep)


def test_purge_of_the_last_entry_removes_the_uuid_directory(host: Host) -> None:
    directory = host.effects().quarantine_dir(UUID, STAMP)
    host.effects().purge(UUID, directory)
    assert os.listdir(host.quarantine) == []


def test_purge_of_a_gone_directory_says_so(host: Host) -> None:
    gone = str(host.quarantine / UUID / STAMP)
    assert host.effects().purge(UUID, gone) == f"{gone} was already gone"


def test_purge_does_not_follow_a_symlink_inside_the_tree(host: Host) -> None:
    victim = host.root / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    directory = host.effects().quarantine_dir(UUID, STAMP)
    os.symlink(victim, os.path.join(directory, "files"))
    host.effects().purge(UUID, directory)
    assert (victim / "precious").read_text() == "keep me"


PURGE_REFUSALS = [
    ("outside the quarantine root", "outside", "is outside"),
    ("a symlinked entry", "symlink", "is a symlink"),
    ("another UUID's directory", "other-uuid", "not a quarantine directory"),
    ("the UUID directory itself", "uuid-dir", "not a quarantine directory"),
]


@pytest.mark.parametrize(
    ("where", "expected"), [c[1:] for c in PURGE_REFUSALS], ids=[c[0] for c in PURGE_REFUSALS]
)
def test_purge_refuses_anything_but_its_own_quarantine_directory(
    host: Host, where: str, expected: str
) -> None:
    directory = host.effects().quarantine_dir(UUID, STAMP)
    target = {
        "outside": str(host.instances),
        "symlink": str(host.quarantine / UUID / "link"),
        "other-uuid": host.effects().quarantine_dir(worlds.random_uuid(), STAMP),
        "uuid-dir": str(host.quarantine / UUID),
    }[where]
    if where == "symlink":
        os.symlink(host.instances, target)
    with pytest.raises(EffectError, match=expected):
        host.effects().purge(UUID, target)
    assert os.path.isdir(directory)
    assert os.path.isdir(host.instances)


# --- leftovers -------------------------------------------------------------------------


def test_leftovers_list_storage_outside_the_instance_directory_and_taps() -> None:
    instances = "/var/lib/nova/instances"
    domain = model.Domain(
        uuid=UUID,
        name="instance-00000001",
        state=model.DomainState.SHUTOFF,
        persistent=True,
        job_active=False,
        disks=(
            model.Disk("vda", "disk", "file", f"{instances}/{UUID}/disk"),
            model.Disk("hdd", "cdrom", "file", f"{instances}/{UUID}/disk.config"),
            model.Disk("hdc", "cdrom", "file", None),
            model.Disk("vdb", "disk", "network", "rbd:volumes/volume-1", "rbd"),
            model.Disk("vdc", "disk", "block", "/dev/nova-vg/lv-1"),
            model.Disk("vdd", "disk", "network", "iscsi:iqn.2010-10.org:vol/1", "iscsi"),
            model.Disk("vde", "disk", "volume", "pool/vol-1"),
            model.Disk("vdf", "disk", "file", f"{instances}/{UUID}-other/disk"),
        ),
        interfaces=(
            model.Interface("bridge", "fa:16:3e:00:00:01", "tap0001", "br-int"),
            model.Interface("vhostuser", "fa:16:3e:00:00:02", None, "/run/vhu.sock"),
        ),
    )
    assert remnants.remnants(domain, instances) == [
        "disk vdb: network rbd rbd:volumes/volume-1",
        "disk vdc: block device /dev/nova-vg/lv-1 (LVM, iSCSI or FC)",
        "disk vdd: network iscsi iscsi:iqn.2010-10.org:vol/1",
        "disk vde: volume pool/vol-1",
        f"disk vdf: file {instances}/{UUID}-other/disk (outside {instances}/{UUID})",
        "interface tap0001 (bridge on br-int, mac fa:16:3e:00:00:01)",
    ]


def test_a_diskless_guest_without_network_leaves_nothing() -> None:
    domain = model.Domain(UUID, "x", model.DomainState.SHUTOFF, True, False)
    assert remnants.remnants(domain, "/var/lib/nova/instances") == []
