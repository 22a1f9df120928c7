"""``check-config``: the configuration checked strictly, as every command loads it, before a
deployment puts the file in place (the Ansible role's ``validate``; docs/design.md rule 11)."""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, exits

#: Nova's credentials (check-config builds Nova's transport as audit and run do; no request).
NOVA = "[nova]\nauth_type = admin_token\nendpoint = http://nova.example/v2.1\ntoken = t\n"


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["check-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_valid_file_is_named_and_exits_0(tmp_path: pathlib.Path, capsys) -> None:
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        "[DEFAULT]\nhost = cmp-1\n[agent]\naction_deleted = stop\n"
        f"state_dir = {tmp_path}/state\n[metrics]\ntextfile = {tmp_path}/n.prom\n{NOVA}"
    )
    code, out, err = check(capsys, "--config-file", str(conf))
    assert code == exits.OK, err
    assert out == f"configuration valid: {conf}\n"
    assert err == ""
    assert not (tmp_path / "state").exists()  # checking creates nothing
    assert not (tmp_path / "n.prom").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[agent]\naction_deleted = explode\n", ["action_deleted = explode", "log, stop, reap"]),
        ("[agent]\nactoin_deleted = stop\n", ["actoin_deleted"]),
        ("[metrics]\nport = many\n", ["port"]),
        ("[nowhere]\nx = 1\n", ["nowhere"]),
    ],
)
def test_a_bad_value_unknown_key_or_group_is_one_line_and_exit_2(
    tmp_path: pathlib.Path, capsys, text: str, words: list[str]
) -> None:
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(text)
    code, out, err = check(capsys, "--config-file", str(conf))
    assert code == exits.USAGE
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("nova-orphans: config error: ")
    for word in words:
        assert word in line, line


def test_no_file_at_all_is_not_valid(tmp_path: pathlib.Path, capsys, monkeypatch) -> None:
    """Nothing to check is no "valid": the default file missing is a usage error."""
    monkeypatch.setattr("nova_orphans.cli.configure.DEFAULT_CONFIG_FILE", str(tmp_path / "n"))
    code, out, err = check(capsys)
    assert code == exits.USAGE
    assert out == "" and "no config file" in err


def test_a_missing_file_is_one_line_and_exit_2(tmp_path: pathlib.Path, capsys) -> None:
    code, _, err = check(capsys, "--config-file", str(tmp_path / "missing.conf"))
    assert code == exits.USAGE
    assert "missing.conf" in err and len(err.strip().splitlines()) == 1


def test_an_empty_file_is_refused_as_audit_and_run_refuse_it(tmp_path: pathlib.Path, capsys):
    """A 0-byte file holds no Nova credentials: the agent could not start on it."""
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text("")
    code, out, err = check(capsys, "--config-file", str(conf))
    assert code == exits.USAGE
    assert out == ""
    (line,) = err.strip().splitlines()
    assert "[nova] needs auth_type" in line, line
