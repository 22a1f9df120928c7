"""Agent and journal commands refuse bad input: one line, exit 2, nothing changed.

docs/design.md rule 9.
"""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, exits


def conf_file(tmp_path: pathlib.Path, agent: str) -> str:
    path = tmp_path / "nova-orphans.conf"
    path.write_text(
        "[DEFAULT]\nhost = cmp-1\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\n{agent}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )
    return str(path)


CASES = [
    ("an unknown action name", "action_deleted = obliterate", "obliterate"),
    ("a negative grace period", "grace_period = -5", "grace_period"),
    ("a fraction above one", "max_orphan_fraction = 2", "max_orphan_fraction"),
    ("zero sightings", "sightings_required = 0", "sightings_required"),
    ("an allow-listed UUID that is not one", "allow_uuids = nope", "not a UUID"),
    (
        "a quarantine directory that cannot be created",
        "quarantine_dir = /etc/hostname/q",
        "quarantine directory",
    ),
]


@pytest.mark.parametrize(("agent", "words"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_bad_agent_config_exits_2_and_changes_nothing(tmp_path, capsys, world, agent, words):
    code = cli.main(
        ["run", "--once", "--config-file", conf_file(tmp_path, agent), "--libvirt-uri", world]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and words in err[0], err
    # Nothing was created: no journal, no quarantine.
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["restore", "not-a-uuid"],
        ["history", "--uuid", "1234"],
        ["purge"],
        ["purge", "--older-than", "-1"],
        ["purge", "--older-than", "soon"],
        ["quarantine"],
    ],
    ids=[
        "restore a non-UUID",
        "history of a non-UUID",
        "purge without age",
        "purge negative age",
        "purge garbage age",
        "quarantine without sub-command",
    ],
)
def test_bad_journal_commands_exit_2(capsys, argv):
    assert cli.main(argv) == exits.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nova-orphans: usage error")


def test_restore_of_a_uuid_not_in_quarantine_exits_2(tmp_path, capsys):
    (tmp_path / "state" / "quarantine").mkdir(parents=True)
    code = cli.main(
        [
            "restore",
            "--config-file",
            conf_file(tmp_path, ""),
            "11111111-2222-3333-4444-555555555555",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and "no restorable quarantine entry" in err[0]


def test_missing_nova_credentials_create_no_state(tmp_path, capsys, world):
    path = tmp_path / "nova-orphans.conf"
    path.write_text(f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 'state'}\n")
    code = cli.main(["run", "--once", "--config-file", str(path), "--libvirt-uri", world])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and "auth_type" in err[0]
    assert not (tmp_path / "state").exists()
