"""Tokens and passwords never appear in any output or log, ``--debug`` included.

``audit`` and ``run --once`` run with ``--debug`` against the simulated Nova over
HTTP through a real keystoneauth session (admin_token, then password against a
Keystone), with every library logging at DEBUG into a log file; then stdout,
stderr and every file written are searched for the secrets.
"""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, exits
from nova_orphans.fakes.nova import SimulatedNova
from tests import http_nova

ADMIN_TOKEN = "s3cret-admin-token-4242"
PASSWORD = "s3cret-password-1717"
SECRETS = (ADMIN_TOKEN, PASSWORD, http_nova.ISSUED_TOKEN)

AUTH = {
    "admin_token": "auth_type = admin_token\nendpoint = {url}\ntoken = " + ADMIN_TOKEN + "\n",
    "password": (
        "auth_type = password\nauth_url = {auth_url}\nusername = nova-orphans\n"
        f"password = {PASSWORD}\nproject_name = service\nuser_domain_name = Default\n"
        "project_domain_name = Default\n"
    ),
}


@pytest.fixture
def cloud():
    nova = SimulatedNova()
    nova.add_compute("cmp-1")
    nova.boot("cmp-1", name="kept")
    with http_nova.serve(nova, PASSWORD, ADMIN_TOKEN) as served:
        yield served


def config(tmp_path: pathlib.Path, cloud: http_nova.Cloud, auth: str) -> str:
    path = tmp_path / "nova-orphans.conf"
    path.write_text(
        "[DEFAULT]\nhost = cmp-1\n"
        f"log_file = {tmp_path / 'logs' / 'nova-orphans.log'}\n"
        # NOTE: every library at DEBUG, keystoneauth's request/response dumps included.
        "default_log_levels = keystoneauth=DEBUG,urllib3=DEBUG,stevedore=DEBUG\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\n"
        "[nova]\ntimeout = 5\n" + AUTH[auth].format(url=cloud.url, auth_url=cloud.auth_url)
    )
    (tmp_path / "logs").mkdir(exist_ok=True)
    return str(path)


def written(root: pathlib.Path) -> str:
    """Every file under ``root`` (logs, journal, state), as text."""
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(root.rglob("*")) if p.is_file()
    )


@pytest.mark.parametrize("auth", sorted(AUTH))
@pytest.mark.parametrize("command", [["audit"], ["run", "--once"]], ids=["audit", "run"])
def test_no_secret_in_any_output_or_log_with_debug(tmp_path, capsys, world, cloud, auth, command):
    conf = config(tmp_path, cloud, auth)
    code = cli.main([*command, "--debug", "--config-file", conf, "--libvirt-uri", world])
    out, err = capsys.readouterr()
    log = (tmp_path / "logs" / "nova-orphans.log").read_text()
    # The secrets were really used, and the requests really logged at DEBUG:
    assert (ADMIN_TOKEN if auth == "admin_token" else http_nova.ISSUED_TOKEN) in cloud.tokens_seen
    assert "REQ: curl" in log and "X-Auth-Token" in log, log[-2000:]
    assert code in (exits.OK, exits.FOUND, exits.ERROR), err
    # NOTE: our own config (which names the secret) is the one file allowed to hold it.
    pathlib.Path(conf).unlink()
    everything = "\n".join([out, err, written(tmp_path)])
    for secret in SECRETS:
        assert secret not in everything


def test_a_config_error_in_a_secret_does_not_show_it(tmp_path, capsys, world):
    # A "$" in a token reads as a reference to another option: the error names neither.
    conf = tmp_path / "c.conf"
    conf.write_text("[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = $topsecret42\n")
    code = cli.main(["audit", "--debug", "--config-file", str(conf), "--libvirt-uri", world])
    err = capsys.readouterr().err
    assert code == exits.USAGE
    assert "topsecret42" not in err and "****" in err
    assert len(err.strip().splitlines()) == 1, err
