"""What the operator reads when a sub-command failed: one line on stderr, and the exit code."""

from __future__ import annotations

import logging

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from nova_orphans import conf as config
from nova_orphans.act.effects import EffectError
from nova_orphans.cli.common import EXIT_ERROR, EXIT_USAGE, fail, one_line
from nova_orphans.observe.errors import ObserveError
from nova_orphans.record.journal import JournalError, QuarantineBusy
from nova_orphans.record.lock import LiveAgentRunning

LOG = logging.getLogger(__name__)


def report(exc: Exception) -> int:
    """Say why ``exc`` stopped the sub-command, in one line; return the exit code."""
    if isinstance(exc, (cfg.Error, config.ConfigError, ks_exc.ClientException)):
        return fail(EXIT_USAGE, f"config error: {one_line(exc)}")
    if isinstance(exc, LiveAgentRunning):
        # NOTE: docs/design.md rule 14: a second live agent on the host is a deployment error.
        return fail(EXIT_USAGE, f"error: {one_line(exc)}")
    if isinstance(exc, QuarantineBusy):
        return fail(EXIT_ERROR, f"error: {one_line(exc)}")
    if isinstance(exc, JournalError):
        # NOTE: the journal's path is configuration; an agent that cannot record stops.
        return fail(EXIT_USAGE, f"journal error: {one_line(exc)}")
    if isinstance(exc, (ObserveError, EffectError)):
        # NOTE: the message names libvirt or Nova, and why.
        return fail(EXIT_ERROR, f"error: {one_line(exc)}")
    # NOTE: never a traceback on the operator's terminal (docs/design.md rule 9);
    # it goes to the log at DEBUG, for a bug report.
    LOG.debug("unexpected error", exc_info=exc)
    return fail(EXIT_ERROR, f"unexpected error: {type(exc).__name__}: {one_line(exc)}")
