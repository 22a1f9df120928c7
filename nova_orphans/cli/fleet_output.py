"""The fleet audit's output files (``--json-file``, ``--metrics-textfile``), for both ways of
auditing the fleet: checked before any work, written whole, never through a link.

NOTE: a playbook or a dashboard reads these files while the next audit writes them, so each is
replaced whole (``record.files.write_whole``, the one copy of that rule). The name given must be
a regular file or nothing yet: a symbolic link would be replaced by a file (``/dev/stdout``
would stop being the terminal) or, followed, write where it points; a device or a FIFO would
take or block the write. A write that fails (no space, read-only, permission) is an I/O error
(exit 1) naming its cause, after the fleet was printed, and leaves no temporary file behind.
"""

from __future__ import annotations

import os

from nova_orphans import config, exits
from nova_orphans.cli import common
from nova_orphans.fleet.records import MergedFleet
from nova_orphans.record import files

#: The JSON document's mode: the fleet's findings are the operators' (group-readable, as the
#: reports' directory of the Ansible collection is).
JSON_MODE = 0o640
#: The textfile's mode: node_exporter's own user reads it, whatever the writer's umask.
TEXTFILE_MODE = 0o644


def check_output_file(path: str | None, option: str) -> None:
    """``path`` (``option``) can be written and replaced whole: its directory exists and is
    writable, and the name is a regular file or nothing yet; else ``UsageError``."""
    if path is None:
        return
    what = f"{option} {path}"
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise common.UsageError(f"{what}: no such directory")
    if os.path.islink(path):
        raise common.UsageError(f"{what}: a symbolic link; name the file itself")
    try:
        config.writable_file(path, what)
    except config.ConfigError as exc:
        raise common.UsageError(str(exc)) from None


def write_outputs(
    fleet: MergedFleet, document: str, json_file: str | None, textfile: str | None
) -> int:
    """Write the JSON document and the metrics textfile asked for; ``exits.OK``, or
    ``exits.ERROR`` after one stderr line per file that could not be written."""
    code = exits.OK
    wanted = (
        ("--json-file", json_file, JSON_MODE, lambda: document + "\n"),
        ("--metrics-textfile", textfile, TEXTFILE_MODE, lambda: metrics_text(fleet)),
    )
    for option, path, mode, text in wanted:
        if path is None:
            continue
        try:
            files.write_whole(path, text(), mode)
        except OSError as exc:
            code = common.fail(exits.ERROR, f"{option} {path}: not written: {files.cause(exc)}")
    return code


def metrics_text(fleet: MergedFleet) -> str:
    """The fleet audit's result in node-exporter's textfile format."""
    # NOTE: imported here: prometheus_client is loaded only by a fleet audit that writes
    # metrics (start-up time of the CLI).
    from nova_orphans.record.metrics import FleetMetrics

    metrics = FleetMetrics()
    not_merged = len(fleet.incomplete)
    metrics.record(
        fleet.counts(),
        audited=len(fleet.hosts) - not_merged,
        unreachable=not_merged,
        at=fleet.checked_at.timestamp(),
    )
    return metrics.text()
