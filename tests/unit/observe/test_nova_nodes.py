"""Nova's compute nodes of a host, nova-compute's compute_id, and where our config finds it."""

from __future__ import annotations

import os
import pathlib

import pytest

from nova_orphans import config
from nova_orphans.config import nova_compute
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.observe.errors import NovaError
from nova_orphans.observe.nova import nodes as nova_nodes
from nova_orphans.observe.nova.observer import NovaObserver


@pytest.fixture
def nova() -> SimulatedNova:
    sim = SimulatedNova()
    sim.add_compute("cmp-1", node="cmp-1.example.org")
    sim.add_compute("cmp-10", node="cmp-10.example.org")
    sim.add_compute("host1", hypervisor_type="fake")
    return sim


def observer(sim: SimulatedNova) -> NovaObserver:
    return NovaObserver(sim, page_size=2, retry=lambda call: call())


def test_a_libvirt_node_is_found_by_its_hostname_in_one_request(nova):
    nodes = nova_nodes.nodes_for(observer(nova), "cmp-1", "cmp-1.example.org")
    assert [(n.host, n.hypervisor_hostname, n.hypervisor_type) for n in nodes] == [
        ("cmp-1", "cmp-1.example.org", "QEMU")
    ]
    assert nodes[0].uuid == nova.computes["cmp-1"].node_uuid
    assert nova.request_count == 1


def test_a_host_whose_node_is_not_the_libvirts_is_found_in_the_paged_listing(nova):
    nodes = nova_nodes.nodes_for(observer(nova), "host1", "cmp-1.example.org")
    assert sorted((n.host, n.hypervisor_type) for n in nodes) == [
        ("cmp-1", "QEMU"),
        ("host1", "fake"),
    ]
    # The search, then every page of the listing (3 nodes, pages of 2).
    assert nova.requests["os-hypervisors/detail"] == 3


def test_a_hostname_nova_does_not_know_is_no_node(nova):
    nodes = nova_nodes.nodes_for(observer(nova), "cmp-99", "nowhere.example.org")
    assert nodes == ()


def test_a_failing_nova_is_an_error_not_an_empty_answer(nova):
    nova.inject(Fault.SERVER_ERROR, times=5, path="/os-hypervisors")
    with pytest.raises(NovaError):
        nova_nodes.nodes_for(observer(nova), "cmp-1", "cmp-1.example.org")


def test_compute_id_is_read_where_nova_compute_reads_it(tmp_path):
    etc, state = tmp_path / "etc", tmp_path / "state"
    etc.mkdir()
    state.mkdir()
    node = "71d94ffd-8fab-463e-973f-a02dfa1ce9db"
    (state / "compute_id").write_text(node.upper() + "\n")
    found = nova_nodes.read_compute_id([str(etc), str(state)])
    assert found.uuids == {str(state / "compute_id"): node}
    (etc / "compute_id").write_text("be4f2e22-1b5a-4269-b447-4a9343e016aa")
    assert len(set(nova_nodes.read_compute_id([str(etc), str(state)]).uuids.values())) == 2


def test_no_compute_id_says_where_it_was_looked_for(tmp_path):
    assert nova_nodes.read_compute_id([str(tmp_path)]).absent == (
        f"no compute_id file in {tmp_path}"
    )
    assert "no directory" in nova_nodes.read_compute_id([]).absent


@pytest.mark.parametrize(
    ("nova_conf", "dirs"),
    [
        ("[DEFAULT]\nhost = cmp-1\nstate_path = /srv/nova\n", ["{etc}", "/srv/nova"]),
        ("[DEFAULT]\nhost = cmp-1\n", ["{etc}"]),
    ],
    ids=["nova.conf's state_path", "nova's packaged default state_path"],
)
def test_compute_id_directories_come_from_nova_conf_and_where_nova_compute_keeps_its_state(
    tmp_path: pathlib.Path, nova_conf, dirs
):
    """docs/design.md rule 10: nova.conf's directory and state_path, then every place
    nova-compute keeps its state by default (the packages' /var/lib/nova, kolla's volume),
    with or without nova_config_file."""
    (tmp_path / "nova.conf").write_text(nova_conf)
    ours = tmp_path / "ours.conf"
    ours.write_text(f"[DEFAULT]\nnova_config_file = {tmp_path / 'nova.conf'}\n")
    settings = config.host_settings(config.load([str(ours)]))
    defaults = list(nova_compute.NOVA_STATE_DIRS)
    assert list(settings.compute_id_dirs) == [d.format(etc=tmp_path) for d in dirs] + defaults
    assert list(config.host_settings(config.load([])).compute_id_dirs) == defaults


def test_by_default_the_packages_state_path_and_kolla_volumes_are_searched():
    """Without any config the tool looks where nova-compute keeps its state as packaged
    (state_path /var/lib/nova) and where kolla-ansible's nova_compute named volume is
    (mounted on /var/lib/nova in its container), under Docker and Podman."""
    assert nova_compute.NOVA_STATE_DIRS_DEFAULT == (
        "/var/lib/nova",
        "/var/lib/docker/volumes/nova_compute/_data",
        "/var/lib/containers/storage/volumes/nova_compute/_data",
    )


def test_a_hypervisor_listing_failing_while_a_cell_is_down_names_the_cell(nova):
    """docs/design.md rule 17: Nova's hypervisor listings read every cell; a cell whose
    database is down fails them (HTTP 500), and the error the operator gets names the
    cell, not the listing."""
    from nova_orphans.observe.errors import NovaCellDown

    nova.add_compute("host3", cell="cell2")
    nova.down_cells.add("cell2")
    nova.inject(Fault.SERVER_ERROR, times=5, path="/os-hypervisors")
    with pytest.raises(NovaCellDown, match="could not reach a cell"):
        nova_nodes.nodes_for(observer(nova), "cmp-1", "cmp-1.example.org")


def _bad_files(tmp_path: pathlib.Path) -> dict[str, str]:
    """Directories whose ``compute_id`` is there but cannot be trusted, and the reason."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("71d94ffd-8fab-463e-973f-a02dfa1ce9db")
    cases = {
        "binary": (lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), "does not hold a UUID"),
        "text": (lambda p: p.write_text("compute-1\n"), "does not hold a UUID"),
        "empty": (lambda p: p.write_text(""), "does not hold a UUID"),
        "large": (lambda p: p.write_text(" " * 4096), "is larger than 64 bytes"),
        "symlink": (lambda p: p.symlink_to(elsewhere), "is a symlink"),
        "fifo": (lambda p: os.mkfifo(p), "is not a regular file"),
        "directory": (lambda p: p.mkdir(), "is not a regular file"),
    }
    found = {}
    for name, (make, why) in cases.items():
        (tmp_path / name).mkdir()
        make(tmp_path / name / "compute_id")
        found[str(tmp_path / name)] = why
    return found


def test_a_compute_id_that_cannot_be_trusted_is_named_never_read_as_a_node(tmp_path):
    """docs/design.md rule 10: the file is content on disk, not trusted: a symlink, a
    FIFO (never blocks), a large file, anything but a UUID is unusable, said so without
    echoing its content, and never becomes a node UUID."""
    for directory, why in _bad_files(tmp_path).items():
        found = nova_nodes.read_compute_id([directory])
        assert found.uuids == {}, directory
        assert found.unusable == (f"{directory}/compute_id {why}",)
