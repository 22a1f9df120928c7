"""``sample-config``, ``systemd-unit`` and ``nova-policy``: print the files the package ships.

The operator redirects them where they belong, e.g.
``nova-orphans systemd-unit > /etc/systemd/system/nova-orphans.service``.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
import sysconfig

from nova_orphans import exits
from nova_orphans.cli import common, configure

SCRIPT = "nova-orphans"
SAMPLE_CONFIG = "nova-orphans.conf.sample"
UNIT = "nova-orphans.service"
#: Nova policy rules granting the role ``nova-orphans-reader`` exactly what the tool reads.
NOVA_POLICY = "nova-policy.yaml"
#: The ExecStart path of the shipped unit: where ``pip install`` as root puts the script.
SHIPPED_EXEC = "/usr/local/bin/nova-orphans"


def shipped(name: str) -> str:
    """The text of a file shipped in ``nova_orphans/data``."""
    return importlib.resources.files("nova_orphans.data").joinpath(name).read_text()


def print_sample_config(args: argparse.Namespace) -> int:
    """Print the sample configuration file."""
    configure.setup_logging(configure.logging_conf(), args)
    sys.stdout.write(shipped(SAMPLE_CONFIG))
    return exits.OK


def print_nova_policy(args: argparse.Namespace) -> int:
    """Print the Nova policy overrides of the least-privilege role."""
    configure.setup_logging(configure.logging_conf(), args)
    sys.stdout.write(shipped(NOVA_POLICY))
    return exits.OK


def print_systemd_unit(args: argparse.Namespace) -> int:
    """Print the systemd unit with ExecStart naming the console script that will run."""
    configure.setup_logging(configure.logging_conf(), args)
    executable = args.executable or console_script()
    if not os.path.isabs(executable):
        raise common.UsageError(f"--executable {executable!r} is not an absolute path")
    if any(c.isspace() or c in "\"'\\" for c in executable):
        raise common.UsageError(f"--executable {executable!r}: systemd needs a path without blanks")
    if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        raise common.UsageError(
            f"no executable {SCRIPT} at {executable}; name it with --executable"
        )
    sys.stdout.write(unit_text(executable))
    return exits.OK


def unit_text(executable: str) -> str:
    """The shipped unit with ``executable`` in ExecStart (``%`` escaped for systemd)."""
    text = shipped(UNIT)
    marker = f"ExecStart={SHIPPED_EXEC} "
    if marker not in text:
        raise RuntimeError(f"the shipped unit has no line starting {marker!r}")
    return text.replace(marker, f"ExecStart={executable.replace('%', '%%')} ")


def console_script() -> str:
    """The ``nova-orphans`` script of this installation.

    NOTE: when run as that script, it is ``argv[0]``; under ``python -m`` it is the
    script pip installed beside this interpreter (a venv's bin, or /usr/local/bin).
    """
    invoked = os.path.abspath(sys.argv[0])
    if os.path.basename(invoked) == SCRIPT:
        return invoked
    return os.path.join(sysconfig.get_path("scripts"), SCRIPT)
