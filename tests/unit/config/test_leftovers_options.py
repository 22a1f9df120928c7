"""``[leftovers]`` (docs/design.md rule 22): when a leftover's command is told, and the host's path
of ``instances_path`` in a container; a relative path is refused at load, like ours."""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, config, exits
from tests.unit.config.test_absolute_instances_path import COMMANDS, refused, write


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_relative_host_instances_path_is_one_line_exit_2(tmp_path, capsys, command):
    conf = write(tmp_path / "n.conf", "[leftovers]\nhost_instances_path = var/lib/nova\n")
    line = refused(capsys, [*COMMANDS[command], "--config-file", conf])
    assert "[leftovers] host_instances_path = var/lib/nova" in line
    assert "must be an absolute path" in line


def load(tmp_path: pathlib.Path, text: str):
    conf = write(tmp_path / "n.conf", text)
    return config.load([conf])


def test_the_leftovers_knobs_default_to_the_guests_and_may_be_set_apart(tmp_path):
    guests = config.policy(load(tmp_path, "[agent]\nsightings_required = 5\ngrace_period = 7\n"))
    assert (guests.leftover_looks, guests.leftover_grace) == (5, 7.0)
    own = config.policy(
        load(
            tmp_path,
            "[agent]\nsightings_required = 5\n[leftovers]\nsightings_required = 2\n"
            "grace_period = 0\n",
        )
    )
    assert (own.leftover_looks, own.leftover_grace) == (2, 0.0)


def test_check_config_accepts_the_group(tmp_path, capsys):
    conf = write(
        tmp_path / "n.conf",
        "[leftovers]\nsightings_required = 1\nhost_instances_path = /srv/nova/instances\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://nova.example/v2.1\ntoken = t\n",
    )
    assert cli.main(["check-config", "--config-file", conf]) == exits.OK
