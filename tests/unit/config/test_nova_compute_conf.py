"""nova-compute's config is read as nova-compute reads it: files, directories, interpolation
and nova's defaults, for the few options nova-orphans shares with it."""

from __future__ import annotations

import pathlib
import socket

import pytest

from nova_orphans import config
from nova_orphans.config import nova_compute
from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH


def write(path: pathlib.Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def settings(tmp_path: pathlib.Path, ours: str) -> config.HostSettings:
    return config.host_settings(config.load([write(tmp_path / "ours.conf", ours)]))


def test_instances_path_follows_state_path_as_in_nova(tmp_path):
    nova = write(tmp_path / "nova.conf", "[DEFAULT]\nstate_path = /srv/nova\n")
    got = settings(tmp_path, f"[DEFAULT]\nnova_config_file = {nova}\n")
    assert got.instances_path == "/srv/nova/instances"
    assert got.compute_id_dirs == (str(tmp_path), "/srv/nova", *nova_compute.NOVA_STATE_DIRS)


def test_an_interpolated_instances_path_is_resolved(tmp_path):
    nova = write(
        tmp_path / "nova.conf",
        "[DEFAULT]\nstate_path = /srv/nova\ninstances_path = $state_path/guests\n",
    )
    got = settings(tmp_path, f"[DEFAULT]\nnova_config_file = {nova}\n")
    assert got.instances_path == "/srv/nova/guests"


def test_nova_compute_conf_after_nova_conf_wins_and_config_dirs_come_last(tmp_path):
    etc = tmp_path / "etc" / "nova"
    files = [
        write(etc / "nova.conf", "[DEFAULT]\nhost = from-nova-conf\nstate_path = /srv/a\n"),
        write(etc / "nova-compute.conf", "[DEFAULT]\nhost = cmp-7\n[libvirt]\nvirt_type = lxc\n"),
    ]
    write(etc / "nova.conf.d" / "10-paths.conf", "[DEFAULT]\nstate_path = /srv/b\n")
    write(etc / "nova.conf.d" / "20-paths.conf", "[DEFAULT]\ninstances_path = $state_path/i\n")
    got = settings(
        tmp_path,
        f"[DEFAULT]\nnova_config_file = {','.join(files)}\n"
        f"nova_config_dir = {etc / 'nova.conf.d'}\n",
    )
    assert got.host == "cmp-7"
    assert got.libvirt_uri == "lxc:///"
    assert got.instances_path == "/srv/b/i"
    assert got.compute_id_dirs == (str(etc), "/srv/b", *nova_compute.NOVA_STATE_DIRS)


@pytest.mark.parametrize(
    ("libvirt", "uri"),
    [
        ("", "qemu:///system"),
        ("virt_type = qemu\n", "qemu:///system"),
        ("virt_type = parallels\n", "parallels:///system"),
        ("virt_type = lxc\nconnection_uri = qemu+tcp://h/system\n", "qemu+tcp://h/system"),
    ],
)
def test_the_libvirt_uri_is_nova_computes(tmp_path, libvirt, uri):
    nova = write(tmp_path / "nova.conf", f"[libvirt]\n{libvirt}")
    assert settings(tmp_path, f"[DEFAULT]\nnova_config_file = {nova}\n").libvirt_uri == uri


def test_without_nova_compute_config_nova_defaults_apply(tmp_path):
    got = settings(tmp_path, "[DEFAULT]\n")
    assert got.host == socket.gethostname()
    assert got.instances_path == DEFAULT_INSTANCES_PATH == "/var/lib/nova/instances"
    assert got.libvirt_uri == "qemu:///system"
    assert got.compute_id_dirs == nova_compute.NOVA_STATE_DIRS


def test_our_settings_win_over_nova_computes(tmp_path):
    nova = write(tmp_path / "nova.conf", "[DEFAULT]\nhost = n\ninstances_path = /n\n")
    got = settings(
        tmp_path,
        f"[DEFAULT]\nnova_config_file = {nova}\nhost = ours\ninstances_path = /ours\n"
        "[libvirt]\nconnection_uri = test:///default\n",
    )
    assert (got.host, got.instances_path, got.libvirt_uri) == ("ours", "/ours", "test:///default")


@pytest.mark.parametrize(
    ("nova_conf", "words"),
    [
        ("[DEFAULT]\ninstances_path = $pybasedir/instances\n", "$pybasedir"),
        ("[DEFAULT\nhost = x\n", "nova-compute config"),
    ],
    ids=["a reference to an option we do not read", "a broken file"],
)
def test_a_bad_nova_compute_config_is_one_clear_config_error(tmp_path, nova_conf, words):
    nova = write(tmp_path / "nova.conf", nova_conf)
    with pytest.raises(config.ConfigError, match="nova-compute config") as caught:
        settings(tmp_path, f"[DEFAULT]\nnova_config_file = {nova}\n")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_config_directory_is_refused(tmp_path):
    with pytest.raises(config.ConfigError, match="nova_config_dir"):
        settings(tmp_path, f"[DEFAULT]\nnova_config_dir = {tmp_path / 'nope'}\n")
