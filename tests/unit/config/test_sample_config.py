"""The sample config in the repository is generated from the options, never hand-edited."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys

import tomllib

from nova_orphans.config import opts

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_the_committed_sample_matches_the_generator(tmp_path):
    out = tmp_path / "sample.conf"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "oslo_config.generator",
            "--config-file",
            str(ROOT / "etc" / "oslo-config-generator.conf"),
            "--output-file",
            str(out),
        ],
        check=True,
        timeout=120,
    )
    committed = (ROOT / "nova_orphans" / "data" / "nova-orphans.conf.sample").read_text()
    assert out.read_text() == committed, (
        "regenerate: oslo-config-generator --config-file etc/oslo-config-generator.conf"
    )


def test_every_option_has_help_text():
    for group, options in opts.list_opts():
        for opt in options:
            assert opt.help, f"[{group or 'DEFAULT'}] {opt.name} has no help text"


def test_the_generator_namespace_is_the_options_aggregate():
    """oslo-config-generator, oslo-config-validator and the docs' option reference read the
    ``nova_orphans`` namespace: it must name the one list of every group's options."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module, _, name = project["entry-points"]["oslo.config.opts"]["nova_orphans"].partition(":")
    assert getattr(importlib.import_module(module), name) is opts.list_opts
    groups = [group for group, _ in opts.list_opts()]
    assert groups == [None, "libvirt", "agent", "metrics", "fleet", "leftovers", "nova", "services"]
