"""``[nova]``'s credentials checked at load (``config/credentials.py``): what is refused is
in the bad-input tour (``tests/unit/cli/test_bad_input.py``); here, what must still pass —
real TLS files, a clouds.yaml cloud — and one warning when TLS verification is off."""

from __future__ import annotations

import datetime
import http.server
import pathlib
import ssl
import threading
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nova_orphans import cli, config, exits
from tests.unit.cli.conftest import _Statuses

TOKEN = "[nova]\nauth_type = admin_token\nendpoint = http://nova.example/v2.1\ntoken = t\n"


def certificate(directory: pathlib.Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key: (certfile, keyfile)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(certfile), str(keyfile)


def check(capsys, text: str, tmp_path: pathlib.Path) -> tuple[int, str, str]:
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(text)
    code = cli.main(["check-config", "--config-file", str(conf)])
    out, err = capsys.readouterr()
    return code, out, err


def test_tls_files_that_parse_are_accepted(tmp_path, capsys):
    certfile, keyfile = certificate(tmp_path)
    code, out, err = check(
        capsys,
        f"{TOKEN}cafile = {certfile}\ncertfile = {certfile}\nkeyfile = {keyfile}\n"
        "tls_ciphers = ECDHE+AESGCM\n",
        tmp_path,
    )
    assert (code, err) == (exits.OK, ""), err
    assert out.startswith("configuration valid")


def test_a_key_that_is_not_the_certificates_is_refused(tmp_path, capsys):
    certfile, _ = certificate(tmp_path)
    (tmp_path / "other").mkdir()
    _, other_key = certificate(tmp_path / "other")
    code, _, err = check(capsys, f"{TOKEN}certfile = {certfile}\nkeyfile = {other_key}\n", tmp_path)
    assert code == exits.USAGE
    (line,) = err.strip().splitlines()
    assert "[nova] certfile" in line and "OpenSSL" in line, line


def test_a_clouds_yaml_cloud_is_accepted(tmp_path, capsys, monkeypatch):
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  c:\n    auth_type: password\n    auth:\n      auth_url: https://k/v3\n"
        "      username: u\n      password: p\n      project_name: p\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    code, out, err = check(capsys, "[nova]\ncloud = c\n", tmp_path)
    assert (code, err) == (exits.OK, ""), err
    assert out.startswith("configuration valid")


def test_the_documented_password_section_is_accepted(tmp_path):
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        "[nova]\nauth_type = password\nauth_url = https://keystone.example:5000/v3\n"
        "username = nova-orphans\npassword = secret\nproject_name = service\n"
        "user_domain_name = Default\nproject_domain_name = Default\n"
        "valid_interfaces = internal,public\ntimeout = 86400\n"
    )
    assert config.load([str(conf)]).nova.timeout == 86400


@pytest.fixture
def https_service(tmp_path) -> Iterator[str]:
    """A service over HTTPS (a self-signed certificate) answering ``/<status>/...`` so."""
    certfile, keyfile = certificate(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Statuses)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certfile, keyfile)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    "nova",
    [
        "auth_type = admin_token\nendpoint = {url}/500/v2.1\ntoken = t\n",
        "auth_type = password\nauth_url = {url}/503/v3\nusername = u\npassword = p\n",
    ],
    ids=["Nova over https", "Keystone over https"],
)
def test_insecure_is_one_warning_whatever_the_requests(
    tmp_path, capsys, world, https_service, nova
):
    """urllib3 warns at each unverified request (a dozen for one audit): one line says it."""
    conf = tmp_path / "nova-orphans.conf"
    section = nova.format(url=https_service)
    conf.write_text(f"[DEFAULT]\nhost = cmp-1\n[nova]\n{section}insecure = true\ntimeout = 2\n")
    code = cli.main(["audit", "--config-file", str(conf), "--libvirt-uri", world])
    out, err = capsys.readouterr()
    assert code == exits.ERROR
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert sum("TLS verification is off" in line for line in lines) == 1, err
    assert "InsecureRequestWarning" not in err
    assert lines[-1].startswith("nova-orphans: error: "), err
