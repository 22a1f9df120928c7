"""Why a request failed, in the operator's words: one short line."""

from __future__ import annotations

import re

from nova_orphans.exceptions import one_line


def short_reason(exc: Exception) -> str:
    """Why a connection failed, without urllib3's layers: "[Errno 111] Connection refused"
    becomes "Connection refused"; otherwise the message on one line."""
    text = one_line(exc)
    found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text) or re.search(
        r"(timed out|Name or service not known|No route to host)", text
    )
    return found.group(1).strip() if found else text
