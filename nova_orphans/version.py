"""The installed version of nova-orphans, from the package metadata."""

from __future__ import annotations

import functools
import importlib.metadata

DISTRIBUTION = "nova-orphans"


@functools.lru_cache(maxsize=1)
def tool_version() -> str:
    """The version pip installed, e.g. ``0.1.0``; ``unknown`` when run from an uninstalled tree."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
