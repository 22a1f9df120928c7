"""Nova credentials the OpenStack way: a keystoneauth section or a clouds.yaml cloud."""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, config, exits
from nova_orphans.observe.nova.session import CredentialsMissing, transport_from_conf


def write(tmp_path: pathlib.Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def clouds_yaml(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        "clouds.yaml",
        (
            "clouds:\n"
            "  test:\n"
            "    auth_type: admin_token\n"
            "    auth:\n"
            "      endpoint: http://127.0.0.1:1/v2.1\n"
            "      token: admin:admin\n"
            "    compute_endpoint_override: http://127.0.0.1:1/v2.1\n"
            "    api_timeout: 2\n"
        ),
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", path)
    return path


def test_a_clouds_yaml_cloud_reaches_nova_through_its_endpoint(
    tmp_path, capsys, world, clouds_yaml
):
    config = write(tmp_path, "c.conf", "[DEFAULT]\nhost = cmp-1\n[nova]\ncloud = test\n")
    code = cli.main(["audit", "--config-file", config, "--libvirt-uri", world])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.ERROR
    assert len(err) == 1 and "Nova" in err[0] and "127.0.0.1:1" in err[0]


def test_an_unknown_cloud_name_is_a_config_error(tmp_path, capsys, world, clouds_yaml):
    config = write(tmp_path, "c.conf", "[DEFAULT]\nhost = cmp-1\n[nova]\ncloud = nope\n")
    code = cli.main(["audit", "--config-file", config, "--libvirt-uri", world])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and "nope" in err[0]


@pytest.mark.parametrize(
    ("section", "endpoint"),
    [
        (
            "auth_type = admin_token\nendpoint = http://nova.example:8774/v2.1\ntoken = t\n",
            "http://nova.example:8774/v2.1",
        ),
        (
            "auth_type = admin_token\nendpoint = http://a.example/v2.1\ntoken = t\n"
            "endpoint_override = http://b.example/v2.1\n",
            "http://b.example/v2.1",
        ),
    ],
    ids=["admin_token endpoint", "endpoint_override wins"],
)
def test_the_keystoneauth_section_decides_the_endpoint(tmp_path, section, endpoint):
    loaded = config.load([write(tmp_path, "c.conf", "[nova]\n" + section)])
    transport = transport_from_conf(loaded)
    assert transport._endpoint() == endpoint
    assert loaded.nova.timeout == 30  # never wait forever by default


def test_a_password_section_loads_every_standard_option(tmp_path):
    loaded = config.load(
        [
            write(
                tmp_path,
                "c.conf",
                (
                    "[nova]\nauth_type = password\nauth_url = http://keystone.example/v3\n"
                    "username = u\npassword = p\nproject_name = service\n"
                    "user_domain_name = Default\nproject_domain_name = Default\n"
                    "region_name = RegionTwo\nvalid_interfaces = internal\n"
                ),
            )
        ]
    )
    transport = transport_from_conf(loaded)
    assert transport._adapter.region_name == "RegionTwo"
    assert transport._adapter.interface == ["internal"]


def test_no_credentials_at_all_is_refused(tmp_path):
    with pytest.raises(CredentialsMissing):
        transport_from_conf(config.load([write(tmp_path, "c.conf", "[DEFAULT]\n")]))


def test_os_cloud_alone_names_the_cloud(tmp_path, capsys, world, clouds_yaml, monkeypatch):
    monkeypatch.setenv("OS_CLOUD", "test")
    config = write(tmp_path, "c.conf", "[DEFAULT]\nhost = cmp-1\n")
    code = cli.main(["audit", "--config-file", config, "--libvirt-uri", world])
    err = capsys.readouterr().err.strip().splitlines()
    # The cloud's endpoint was asked (and is down): not "needs auth_type".
    assert code == exits.ERROR
    assert len(err) == 1 and "127.0.0.1:1" in err[0], err


def test_the_config_files_choice_wins_over_os_cloud(tmp_path, clouds_yaml, monkeypatch):
    monkeypatch.setenv("OS_CLOUD", "test")
    loaded = config.load(
        [
            write(
                tmp_path,
                "c.conf",
                "[nova]\nauth_type = admin_token\nendpoint = http://nova.example/v2.1\ntoken = t\n",
            )
        ]
    )
    assert transport_from_conf(loaded)._endpoint() == "http://nova.example/v2.1"
