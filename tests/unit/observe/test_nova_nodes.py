"""Nova's compute nodes of a host, nova-compute's compute_id, and where our config finds it."""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import conf as config
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.observe import nova_nodes
from nova_orphans.observe.errors import NovaError
from nova_orphans.observe.nova import NovaObserver


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
    assert "nova_config_file not set" in nova_nodes.read_compute_id([]).absent


@pytest.mark.parametrize(
    ("nova_conf", "dirs"),
    [
        ("[DEFAULT]\nhost = cmp-1\nstate_path = /srv/nova\n", ["{etc}", "/srv/nova"]),
        ("[DEFAULT]\nhost = cmp-1\n", ["{etc}", "/var/lib/nova"]),
    ],
    ids=["nova.conf's state_path", "nova's packaged default state_path"],
)
def test_compute_id_directories_come_from_nova_conf(tmp_path: pathlib.Path, nova_conf, dirs):
    (tmp_path / "nova.conf").write_text(nova_conf)
    ours = tmp_path / "ours.conf"
    ours.write_text(f"[DEFAULT]\nnova_config_file = {tmp_path / 'nova.conf'}\n")
    settings = config.host_settings(config.load([str(ours)]))
    assert list(settings.compute_id_dirs) == [d.format(etc=tmp_path) for d in dirs]
    assert config.host_settings(config.load([])).compute_id_dirs == ()


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


def test_a_compute_id_that_is_not_text_is_a_value_that_fails_not_a_crash(tmp_path):
    """A binary (corrupt) compute_id is read as the garbage it is, so the check fails closed.

    docs/design.md rules 9 and 10: no traceback; a compute_id naming no node is a mismatch.
    """
    (tmp_path / "compute_id").write_bytes(b"\xff\xfe\x00garbage")
    found = nova_nodes.read_compute_id([str(tmp_path)])
    (value,) = found.uuids.values()
    assert value and value != "71d94ffd-8fab-463e-973f-a02dfa1ce9db"
