"""What the operator reads when a sub-command failed: one line on stderr, and the exit code."""

from __future__ import annotations

import logging

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from nova_orphans import exits
from nova_orphans.cli.common import fail
from nova_orphans.exceptions import NovaOrphansError, one_line

LOG = logging.getLogger(__name__)

#: The libraries' errors that mean the configuration is wrong (they are no NovaOrphansError).
CONFIG_ERRORS = (cfg.Error, ks_exc.ClientException)


def explain(exc: Exception) -> int:
    """Say why ``exc`` stopped the sub-command, in one line; return the exit code."""
    if isinstance(exc, NovaOrphansError):
        # NOTE: the message names what failed (libvirt, Nova, the journal...), and why.
        return fail(exc.exit_code, f"{exc.label}: {one_line(exc)}")
    if isinstance(exc, CONFIG_ERRORS):
        return fail(exits.USAGE, f"config error: {one_line(exc)}")
    # NOTE: never a traceback on the operator's terminal (docs/design.md rule 9);
    # it goes to the log at DEBUG, for a bug report.
    LOG.debug("unexpected error", exc_info=exc)
    return fail(exits.ERROR, f"unexpected error: {type(exc).__name__}: {one_line(exc)}")
