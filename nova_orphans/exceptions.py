"""The one family of errors nova-orphans raises, and the exit code each one means.

NOTE: imported by ``nova-orphans`` before it knows the sub-command (``cli.common``), so it
imports no library.
"""

from __future__ import annotations

from typing import Any

from nova_orphans import exits


class NovaOrphansError(Exception):
    """Base of every error the tool raises.

    As os-vif's ``ExceptionBase``: a subclass words its message in ``msg_fmt``, filled from
    the keywords it is raised with; one raised with a message of its own keeps that message.
    ``exit_code`` (a name of ``exits``) is what a sub-command this error stops exits with, and
    ``label`` starts the one line the operator reads ("error: ...").
    """

    msg_fmt = "nova-orphans failed"
    exit_code = exits.ERROR
    label = "error"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs = kwargs
        super().__init__(*args or (self.msg_fmt % kwargs,))


def one_line(text: object) -> str:
    """``text`` (an exception, a library's message) folded onto one line.

    NOTE: every error the operator reads is one line; a library's message may span several.
    """
    return " ".join(str(text).split())
