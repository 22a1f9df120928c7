"""The one path of every told step: the command printed for a leftover, or why none. Pure.

docs/design.md rule 22: an operator pastes what the tool prints, often in a loop over
the JSON, so a printed command is a destructive step taken by proxy. It is written here
and nowhere else, and only when every proof a step of the agent needs holds for it:

- the cycle's told verdict is clear (``decide/gate.py``: identity proven, no brake, every
  look succeeded); a kind whose listing was not complete was never judged;
- it comes from this cycle's own look (a carried leftover keeps its look's time);
- its server has no live quarantine entry, no operator hold and no deny rule;
- ownership is proven: Nova's port (``classify/leftover_judge.py``), an attachment made through
  this host's connector, an allocation on the proven compute node, a path an operator
  can paste on the host;
- it was seen in ``required`` looks across the grace period.

Otherwise the leftover is still told, with ``held_by`` and a one-line ``why``.
"""

from __future__ import annotations

import dataclasses
import datetime
import posixpath
import shlex
from collections.abc import Collection, Iterable, Mapping

from nova_orphans.classify.leftover import Held, Leftover, LeftoverKind, Leftovers, Remedy, Verb
from nova_orphans.decide.gate import SafetyVerdict
from nova_orphans.decide.sightings import counts_after
from nova_orphans.model import NovaView, managed_here
from nova_orphans.shapes import UUID, plain_host


@dataclasses.dataclass(frozen=True)
class LeftoverSighting:
    """The looks that saw one leftover with the same step, one after another."""

    key: str
    first_seen: datetime.datetime
    last_seen: datetime.datetime
    looks: int


@dataclasses.dataclass(frozen=True)
class Proofs:
    """What a told step is proven by (each default proves nothing)."""

    #: The cycle's told verdict (``gate.judge_told``).
    verdict: SafetyVerdict
    #: This host (as Nova names it) and the time of this cycle's own look.
    host: str
    now: datetime.datetime
    #: Every leftover's sightings, this look included (``next_sightings``).
    sightings: Mapping[str, LeftoverSighting] = dataclasses.field(default_factory=dict)
    required: int = 3
    grace: datetime.timedelta = datetime.timedelta(hours=1)
    #: Servers on hold (why), deny-listed, or with a live quarantine entry (which one).
    holds: Mapping[str, str] = dataclasses.field(default_factory=dict)
    denied: Collection[str] = frozenset()
    quarantined: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: The compute node UUID identity proved (an allocation's provider must be it).
    node_uuid: str | None = None
    #: ``instances_path`` as the host names it; None: not known, for ``files_root_why``.
    files_root: str | None = None
    files_root_why: str = "the host's instances_path is not known"
    #: The host whose connector made each attachment (Cinder's ``host_name``), by id;
    #: a string: why Cinder could not say.
    attachment_hosts: Mapping[str, str | None] | str = "Cinder was not asked for the connector"


def sighting_key(item: Leftover) -> str | None:
    """What one leftover's sightings are kept under: its kind, subject and step."""
    if item.remedy is None:
        return None
    return f"{item.kind.value} {item.subject} {item.remedy.verb.value}"


def next_sightings(
    previous: Mapping[str, LeftoverSighting],
    leftovers: Leftovers,
    now: datetime.datetime,
    interval: float,
) -> dict[str, LeftoverSighting]:
    """The sightings after a look at ``now`` that found ``leftovers``.

    A leftover not found, or found with another step, starts over; a look less than
    half an ``interval`` after the last one keeps the streak but adds no look
    (``decide/sightings.counts_after``), as for the guests.
    """
    result = {}
    for item in leftovers.items:
        key = sighting_key(item)
        if key is None:
            continue
        before = previous.get(key)
        if before is None:
            result[key] = LeftoverSighting(key, now, now, 1)
            continue
        step = int(counts_after(before.last_seen, now, interval))
        result[key] = dataclasses.replace(before, last_seen=now, looks=before.looks + step)
    return result


def carry(earlier: Leftovers, domains: Collection[str], view: NovaView) -> Leftovers:
    """An earlier look's leftovers, for a cycle that did not look: filtered against this
    cycle's domains and Nova view, keeping their look's time, told without commands."""
    domains = set(domains)

    def still(item: Leftover) -> bool:
        if item.server is None:
            return True
        record = view.servers_here.get(item.server)
        return item.server not in domains and not (
            record is not None and managed_here(record, view.host)
        )

    return dataclasses.replace(
        earlier, items=tuple(i for i in earlier.items if still(i)), carried=True
    )


def tell(leftovers: Leftovers, proofs: Proofs) -> Leftovers:
    """Every leftover with its command, or with ``held_by`` and ``why`` (module docstring)."""
    stale = leftovers.carried or leftovers.looked_at != proofs.now
    items = tuple(_told(item, proofs, stale, leftovers.looked_at) for item in leftovers.items)
    return dataclasses.replace(leftovers, items=items)


def _told(
    item: Leftover, proofs: Proofs, stale: bool, looked_at: datetime.datetime | None
) -> Leftover:
    remedy = item.remedy
    if remedy is None:
        # NOTE: no step at all: a quarantine entry's files say so first; else the judge
        # said why (a live server's files), or it is not Nova's.
        kept = _quarantine(item, None, proofs)
        if kept is not None:
            return _held(item, *kept)
        return _held(item, item.held_by or Held.OWNER, item.why or "not Nova's: never a command")
    item = dataclasses.replace(item, command=None, held_by=None, why=None)
    seen = proofs.sightings.get(sighting_key(item) or "")
    item = dataclasses.replace(item, seen=seen.looks if seen and not stale else 0)
    if not proofs.verdict.clear:
        return _held(item, Held.GATE, proofs.verdict.why)
    if stale:
        when = looked_at.isoformat() if looked_at else "an earlier look"
        return _held(
            item, Held.CARRIED, f"from the look at {when}: a command only from a fresh look"
        )
    for check in (_quarantine, _hold, _owner):
        found = check(item, remedy, proofs)
        if found is not None:
            return _held(item, *found)
    pending = _pending(seen, proofs)
    if pending:
        return _held(item, Held.PENDING, pending)
    command = _command(remedy, proofs)
    if command is None:
        return _held(item, Held.OWNER, "its target is not a canonical UUID")
    return dataclasses.replace(item, command=command)


def _held(item: Leftover, held: Held, why: str) -> Leftover:
    return dataclasses.replace(item, command=None, held_by=held, why=why)


def _servers(item: Leftover, remedy: Remedy | None) -> Iterable[str]:
    target = remedy.target if remedy is not None else None
    return dict.fromkeys(u for u in (item.server, target) if u)


def _quarantine(item: Leftover, remedy: Remedy | None, proofs: Proofs) -> tuple[Held, str] | None:
    for uuid in _servers(item, remedy):
        entry = proofs.quarantined.get(uuid)
        if entry is None:
            continue
        if item.kind is LeftoverKind.FILES:
            return Held.QUARANTINE, f"kept for quarantine entry {entry}"
        return Held.QUARANTINE, f"server {uuid} has a live quarantine entry {entry}"
    return None


def _hold(item: Leftover, remedy: Remedy, proofs: Proofs) -> tuple[Held, str] | None:
    for uuid in _servers(item, remedy):
        if uuid in proofs.holds:
            return Held.HOLD, f"server {uuid} is on hold: {proofs.holds[uuid]}"
        if uuid in proofs.denied:
            return Held.DENY, f"server {uuid} is deny-listed"
    return None


def _owner(item: Leftover, remedy: Remedy, proofs: Proofs) -> tuple[Held, str] | None:
    verb = remedy.verb
    if verb is Verb.DELETE_ATTACHMENT:
        hosts = proofs.attachment_hosts
        if isinstance(hosts, str):
            return Held.OWNER, f"its connector's host is not known: {hosts}"
        host = hosts.get(remedy.target)
        if host != proofs.host:
            whose = f"host {host!r}'s connector" if host else "no connector Cinder names"
            return Held.OWNER, f"Cinder made it through {whose}, not this host's"
    if verb in (Verb.UNSET_ALLOCATION, Verb.AUDIT_ALLOCATIONS, Verb.HEAL_ALLOCATION):
        if proofs.node_uuid is None:
            return Held.PROVIDER, "no compute node UUID of this host is proven"
        if remedy.provider != proofs.node_uuid:
            return Held.PROVIDER, (
                f"provider {remedy.provider} is not the proven compute node {proofs.node_uuid}"
            )
    if verb is Verb.REMOVE_FILES and proofs.files_root is None:
        return Held.PATH, proofs.files_root_why
    return None


def _pending(seen: LeftoverSighting | None, proofs: Proofs) -> str | None:
    looks = seen.looks if seen else 0
    age = proofs.now - seen.first_seen if seen else datetime.timedelta(0)
    if looks >= proofs.required and age >= proofs.grace:
        return None
    return (
        f"seen in {looks} of {proofs.required} looks over {_duration(age)} of "
        f"{_duration(proofs.grace)}: a command once it was seen long enough"
    )


def _duration(value: datetime.timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds % 3600 == 0 and seconds:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"


def _command(remedy: Remedy, proofs: Proofs) -> str | None:
    """The command of ``remedy``: only canonical UUIDs, a plain host name and a quoted
    path go into it (docs/design.md rule 20)."""
    target = remedy.target
    if not UUID.fullmatch(target):
        return None
    verb = remedy.verb
    if verb is Verb.REMOVE_FILES and proofs.files_root:
        return f"rm -r -- {shlex.quote(posixpath.join(proofs.files_root, target))}"
    if verb is Verb.UNBIND_PORT:
        return f"openstack port unset --host {target}"
    if verb is Verb.REBIND_PORT and plain_host(remedy.host):
        return f"openstack port set --host {remedy.host} {target}"
    if verb is Verb.DELETE_ATTACHMENT:
        return f"openstack --os-volume-api-version 3.27 volume attachment delete {target}"
    provider = remedy.provider or ""
    if verb is Verb.UNSET_ALLOCATION and UUID.fullmatch(provider):
        return (
            "openstack --os-placement-api-version 1.12 resource provider allocation unset "
            f"--provider {provider} {target}"
        )
    if verb is Verb.AUDIT_ALLOCATIONS and UUID.fullmatch(provider):
        # NOTE: read-only; its --delete removes only what Nova's database has no
        # instance or migration for, so the operator's next step is Nova's own check.
        return f"nova-manage placement audit --resource_provider {provider} --verbose"
    if verb is Verb.HEAL_ALLOCATION:
        return f"nova-manage placement heal_allocations --instance {target}"
    return None
