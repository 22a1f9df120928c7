"""A relative ``instances_path`` is refused at load (docs/design.md §11, rule 11): ours or
nova-compute's, read from another working directory it would name another directory.

One line naming the file and the key, exit 2, for ``check-config`` as for every command.
"""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, exits


def write(path: pathlib.Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def refused(capsys, argv: list[str]) -> str:
    """The one line a command refusing the config printed (it exited 2, printed nothing else)."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == exits.USAGE, err
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("nova-orphans: config error: ")
    return line


COMMANDS = {
    "check-config": ["check-config"],
    "audit": ["audit", "--libvirt-uri", "test:///default"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("value", ["instances", "./instances", "var/lib/nova/instances"])
def test_our_relative_instances_path_is_refused_naming_file_and_key(
    tmp_path, capsys, command, value
):
    ours = write(tmp_path / "ours.conf", f"[DEFAULT]\nhost = cmp-1\ninstances_path = {value}\n")
    line = refused(capsys, [*COMMANDS[command], "--config-file", ours])
    assert f"{ours}: [DEFAULT] instances_path = {value} is not valid" in line
    assert line.endswith("must be an absolute path")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_nova_computes_relative_instances_path_is_refused_naming_its_file(
    tmp_path, capsys, command
):
    nova = write(tmp_path / "nova.conf", "[DEFAULT]\ninstances_path = instances\n")
    ours = write(tmp_path / "ours.conf", f"[DEFAULT]\nnova_config_file = {nova}\n")
    line = refused(capsys, [*COMMANDS[command], "--config-file", ours])
    assert line.endswith(
        f"nova-compute config {nova}: [DEFAULT] instances_path = instances must be an absolute path"
    )


def test_a_relative_state_path_that_makes_it_relative_is_named(tmp_path, capsys):
    """nova's default ``instances_path = $state_path/instances``: the culprit is state_path,
    in the file that set it, not the last one read."""
    nova = write(tmp_path / "nova.conf", "[DEFAULT]\nstate_path = lib/nova\n")
    compute = write(tmp_path / "nova-compute.conf", "[DEFAULT]\nhost = cmp-1\n")
    ours = write(tmp_path / "ours.conf", f"[DEFAULT]\nnova_config_file = {nova},{compute}\n")
    line = refused(capsys, ["check-config", "--config-file", ours])
    assert line.endswith(
        f"nova-compute config {nova}: [DEFAULT] state_path = lib/nova must be an absolute "
        "path (instances_path = lib/nova/instances)"
    )


def test_the_file_that_wins_is_the_one_named(tmp_path, capsys):
    """An absolute value in nova.conf overridden by a relative one in nova_config_dir: the
    directory's file set the value in use, and is the one named."""
    nova = write(tmp_path / "nova.conf", "[DEFAULT]\ninstances_path = /srv/nova/instances\n")
    later = write(tmp_path / "nova.conf.d" / "50-paths.conf", "[DEFAULT]\ninstances_path = i\n")
    ours = write(
        tmp_path / "ours.conf",
        f"[DEFAULT]\nnova_config_file = {nova}\nnova_config_dir = {tmp_path / 'nova.conf.d'}\n",
    )
    line = refused(capsys, ["check-config", "--config-file", ours])
    assert f"nova-compute config {later}: [DEFAULT] instances_path = i " in line
