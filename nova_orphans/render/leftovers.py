"""The leftovers of one host (docs/design.md §8b) for people (lines) and programs (JSON)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from nova_orphans import shapes
from nova_orphans.classify import leftover
from nova_orphans.classify.leftover import Leftover, LeftoverKind, Leftovers
from nova_orphans.render import table


def record(leftovers: Leftovers | None) -> dict[str, Any] | None:
    """The leftovers as JSON-ready data; None when they were not looked for.

    ``counts`` has every kind: a number, or null when the kind was not checked (its
    reason is in ``not_checked``): never 0 for a look that was not made.
    """
    if leftovers is None:
        return None
    return {
        "counts": {k.value: leftovers.count(k) for k in LeftoverKind},
        "not_checked": {k.value: why for k, why in leftovers.not_checked.items()},
        "cost": leftover.totals(leftovers),
        "looked_at": leftovers.looked_at.isoformat() if leftovers.looked_at else None,
        "carried": leftovers.carried,
        "items": [item_record(i) for i in leftovers.items],
    }


#: What a leftover's JSON leaves out: the step before it is told (its command says it).
_INTERNAL = ("remedy",)


def item_record(item: Leftover) -> dict[str, Any]:
    """One leftover as JSON-ready data: ``command`` null with ``held_by`` and ``why`` when
    no command is told (docs/design.md rule 22)."""
    data = {k: v for k, v in dataclasses.asdict(item).items() if k not in _INTERNAL}
    held = item.held_by.value if item.held_by else None
    return data | {"kind": item.kind.value, "held_by": held}


def lines(leftovers: Leftovers | None, listed: bool, wide: bool) -> list[str]:
    """One summary line per kind; with ``listed``, each leftover and its removal command.

    NOTE: a command is printed whole on its own line, never wrapped, so that it can
    be pasted as it is; it holds only validated UUIDs (and a quoted path). A leftover
    without one says why on that line instead (``no command (held_by): why``).
    """
    if leftovers is None:
        return []
    out: list[str] = []
    for kind in LeftoverKind:
        out += table.fit(f"leftovers {kind.value}: {summary(leftovers, kind)}", wide)
    if listed:
        for item in leftovers.items:
            out += table.fit(f"{item.kind.value} {item.subject}: {item.reason}", wide, "  ")
            if item.command is not None:
                out.append("    " + table.escape(item.command))
            else:
                held = item.held_by.value if item.held_by else "held"
                out += table.fit(f"no command ({held}): {item.why}", wide, "    ")
    return out


def summary(leftovers: Leftovers, kind: LeftoverKind) -> str:
    """``2 (1.5 GiB disk)``, or ``not checked: <why>``."""
    if kind in leftovers.not_checked:
        return f"not checked: {leftovers.not_checked[kind]}"
    items = leftovers.of(kind)
    costs = _costs(items)
    held = sum(1 for i in items if i.command is None)
    if items and kind is not LeftoverKind.FOREIGN_PORT:
        costs = ", ".join(c for c in (costs, f"{held} without a command" if held else "") if c)
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
        parts.append(f"{memory * shapes.MIB / shapes.GIB:.1f} GiB memory")
    if disk:
        parts.append(f"{disk / shapes.GIB:.1f} GiB disk")
    if missing:
        parts.append(f"{missing} servers here with no allocation")
    return ", ".join(parts)
