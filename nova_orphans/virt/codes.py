"""libvirt's state, job and flag codes in our words.

A domain's state and its reason become a ``Status``: our state, whether the domain
holds a running guest, and whether the pair by itself means a migration is under way.
The flags the seam's verbs pass are named here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import libvirt

from nova_orphans import model

_STATES = {
    libvirt.VIR_DOMAIN_NOSTATE: model.DomainState.NOSTATE,
    libvirt.VIR_DOMAIN_RUNNING: model.DomainState.RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED: model.DomainState.BLOCKED,
    libvirt.VIR_DOMAIN_PAUSED: model.DomainState.PAUSED,
    libvirt.VIR_DOMAIN_SHUTDOWN: model.DomainState.SHUTDOWN,
    libvirt.VIR_DOMAIN_SHUTOFF: model.DomainState.SHUTOFF,
    libvirt.VIR_DOMAIN_CRASHED: model.DomainState.CRASHED,
    libvirt.VIR_DOMAIN_PMSUSPENDED: model.DomainState.PMSUSPENDED,
}
# (state, reason) pairs that by themselves mean a migration is under way,
# e.g. the paused incoming copy on the destination or a post-copy phase.
_MIGRATING = frozenset(
    {
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_MIGRATION),
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_POSTCOPY),
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_POSTCOPY_FAILED),
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_POSTCOPY),
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_POSTCOPY_FAILED),
    }
)
_INACTIVE_STATES = (
    libvirt.VIR_DOMAIN_SHUTOFF,
    libvirt.VIR_DOMAIN_CRASHED,
    libvirt.VIR_DOMAIN_NOSTATE,
)
JOB_RUNNING = (libvirt.VIR_DOMAIN_JOB_BOUNDED, libvirt.VIR_DOMAIN_JOB_UNBOUNDED)
#: The scan's one bulk call asks for the state and what each domain consumes.
#: NOTE: without VIR_CONNECT_GET_ALL_DOMAINS_STATS_ENFORCE_STATS a driver answers
#: what it supports (the test driver: the state alone); the rest comes from the XML.
SCAN_STATS = (
    libvirt.VIR_DOMAIN_STATS_STATE
    | libvirt.VIR_DOMAIN_STATS_CPU_TOTAL
    | libvirt.VIR_DOMAIN_STATS_BALLOON
    | libvirt.VIR_DOMAIN_STATS_VCPU
    | libvirt.VIR_DOMAIN_STATS_BLOCK
)
#: The persistent definition with its secure fields (a read-only connection may not ask).
DEFINITION_XML = libvirt.VIR_DOMAIN_XML_INACTIVE
SECURE_XML = libvirt.VIR_DOMAIN_XML_SECURE
# Undefine flags in the order they are given up when the driver rejects them.
_UNDEFINE_FLAGS = (
    ("managed-save", "VIR_DOMAIN_UNDEFINE_MANAGED_SAVE"),
    ("snapshots-metadata", "VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA"),
    ("checkpoints-metadata", "VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA"),
    ("keep-nvram", "VIR_DOMAIN_UNDEFINE_KEEP_NVRAM"),
    ("keep-tpm", "VIR_DOMAIN_UNDEFINE_KEEP_TPM"),
)


def undefine_flags() -> list[tuple[str, int]]:
    """The undefine flags these bindings know, labelled, in the order they are given up."""
    return [
        (label, getattr(libvirt, name)) for label, name in _UNDEFINE_FLAGS if hasattr(libvirt, name)
    ]


@dataclasses.dataclass(frozen=True)
class Status:
    """A domain's state in our words: ``state``; ``active``: it holds a running guest (it
    is not shut off, crashed or without state); ``migrating``: the state and its reason
    by themselves mean a migration is under way."""

    state: model.DomainState
    active: bool
    migrating: bool


def status(state: int, reason: int) -> Status:
    """libvirt's state and reason codes as a ``Status`` (an unknown state is NOSTATE)."""
    return Status(
        state=_STATES.get(state, model.DomainState.NOSTATE),
        active=state not in _INACTIVE_STATES,
        migrating=(state, reason) in _MIGRATING,
    )


def status_of(record: Mapping[str, Any]) -> Status:
    """The status in one bulk stats record."""
    return status(
        record.get("state.state", libvirt.VIR_DOMAIN_NOSTATE), record.get("state.reason", 0)
    )
