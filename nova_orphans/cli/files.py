"""``sample-config``, ``systemd-unit``, ``nova-policy``, ``alert-rules``, ``grafana-dashboard``
and ``report-schema``: print the files the package ships.

The operator redirects them where they belong, e.g.
``nova-orphans systemd-unit > /etc/systemd/system/nova-orphans.service``.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
import sysconfig
import urllib.parse

from nova_orphans import exits
from nova_orphans.cli import common, configure

SCRIPT = "nova-orphans"
SAMPLE_CONFIG = "nova-orphans.conf.sample"
UNIT = "nova-orphans.service"
#: Nova policy rules granting the role ``nova-orphans-reader`` exactly what the tool reads.
NOVA_POLICY = "nova-policy.yaml"
#: Prometheus alert rules (deploy/prometheus), the Grafana dashboard (deploy/grafana), the JSON
#: report's schema (docs/schema): linked into the package, so one copy of each exists.
ALERT_RULES = "nova-orphans.rules.yml"
DASHBOARD = "nova-orphans.json"
REPORT_SCHEMA = "report.schema.json"
#: How each alert's runbook_url starts in the shipped rules (relative to the docs' root).
RUNBOOK_PREFIX = 'runbook_url: "admin/metrics.html#'
#: The ExecStart path of the shipped unit: where ``pip install`` as root puts the script.
SHIPPED_EXEC = "/usr/local/bin/nova-orphans"


def shipped(name: str) -> str:
    """The text of a file shipped in ``nova_orphans/data``."""
    return importlib.resources.files("nova_orphans.data").joinpath(name).read_text()


#: The sub-commands that print a shipped file as it is, and the file each prints.
PRINTED_AS_SHIPPED = {
    "sample-config": SAMPLE_CONFIG,
    "nova-policy": NOVA_POLICY,
    "grafana-dashboard": DASHBOARD,
    "report-schema": REPORT_SCHEMA,
}


def print_shipped(args: argparse.Namespace) -> int:
    """Print the file the sub-command stands for (``PRINTED_AS_SHIPPED``), as shipped."""
    configure.setup_logging(configure.logging_conf(), args)
    sys.stdout.write(shipped(PRINTED_AS_SHIPPED[args.command]))
    return exits.OK


def print_alert_rules(args: argparse.Namespace) -> int:
    """Print the alert rules, their runbook URLs under ``--runbook-base`` when given."""
    configure.setup_logging(configure.logging_conf(), args)
    sys.stdout.write(alert_rules(args.runbook_base))
    return exits.OK


def alert_rules(runbook_base: str | None) -> str:
    """The shipped alert rules; with ``runbook_base``, each runbook_url absolute under it."""
    text = shipped(ALERT_RULES)
    if runbook_base is None:
        return text
    parsed = urllib.parse.urlsplit(runbook_base)
    # NOTE: the URL goes into a double-quoted YAML string: no quote, backslash or blank.
    unsafe = any(c in '"\\' or not c.isprintable() or c.isspace() for c in runbook_base)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or unsafe:
        raise common.UsageError(f"--runbook-base {runbook_base!r} is not an http(s) URL")
    base = runbook_base if runbook_base.endswith("/") else runbook_base + "/"
    return text.replace(RUNBOOK_PREFIX, f'runbook_url: "{base}admin/metrics.html#')


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
