"""The leftovers of one host (docs/design.md §8b) for people (lines) and programs (JSON)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from nova_orphans.core import strays
from nova_orphans.core.strays import Leftover, Leftovers, StrayKind
from nova_orphans.render import table


def record(leftovers: Leftovers | None) -> dict[str, Any] | None:
    """The leftovers as JSON-ready data; None when they were not looked for.

    ``counts`` has every kind: a number, or null when the kind was not checked (its
    reason is in ``not_checked``): never 0 for a look that was not made.
    """
    if leftovers is None:
        return None
    return {
        "counts": {k.value: leftovers.count(k) for k in StrayKind},
        "not_checked": {k.value: why for k, why in leftovers.not_checked.items()},
        "cost": strays.totals(leftovers),
        "items": [item_record(i) for i in leftovers.items],
    }


def item_record(item: Leftover) -> dict[str, Any]:
    """One leftover as JSON-ready data."""
    return dataclasses.asdict(item) | {"kind": item.kind.value}


def lines(leftovers: Leftovers | None, listed: bool, wide: bool) -> list[str]:
    """One summary line per kind; with ``listed``, each leftover and its removal command.

    NOTE: a command is printed whole on its own line, never wrapped, so that it can
    be pasted as it is; it holds only validated UUIDs (and a quoted path).
    """
    if leftovers is None:
        return []
    out: list[str] = []
    for kind in StrayKind:
        out += table.fit(f"leftovers {kind.value}: {summary(leftovers, kind)}", wide)
    if listed:
        for item in leftovers.items:
            out += table.fit(f"{item.kind.value} {item.subject}: {item.reason}", wide, "  ")
            out.append("    " + table.escape(item.command))
    return out


def summary(leftovers: Leftovers, kind: StrayKind) -> str:
    """``2 (1.5 GiB disk)``, or ``not checked: <why>``."""
    if kind in leftovers.not_checked:
        return f"not checked: {leftovers.not_checked[kind]}"
    items = leftovers.of(kind)
    costs = _costs(items)
    return f"{len(items)}" + (f" ({costs})" if costs else "")


def _costs(items: Iterable[Leftover]) -> str:
    items = list(items)
    parts = []
    vcpus = sum(i.vcpus or 0 for i in items)
    memory = sum(i.memory_mb or 0 for i in items)
    disk = sum(i.disk_bytes or 0 for i in items)
    missing = sum(1 for i in items if i.missing)
    if vcpus:
        parts.append(f"{vcpus} vCPUs")
    if memory:
        parts.append(f"{memory * strays.MIB / strays.GIB:.1f} GiB memory")
    if disk:
        parts.append(f"{disk / strays.GIB:.1f} GiB disk")
    if missing:
        parts.append(f"{missing} servers here with no allocation")
    return ", ".join(parts)
