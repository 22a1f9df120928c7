"""The sample config in the repository is generated from the options, never hand-edited."""

from __future__ import annotations

import pathlib
import subprocess
import sys

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
