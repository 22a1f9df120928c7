"""Classify a whole fleet: each host on its own, then across hosts.

Pure functions of what the observers saw: no I/O, no clock. Each host is
classified by ``classify.classify`` exactly as its own agent would; the only
cross-host kind is ``split-brain``: one UUID *running* on two or more hosts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nova_orphans.classify.guests import classify
from nova_orphans.model import (
    Domain,
    DomainState,
    Finding,
    Kind,
    NovaView,
    Selector,
)

#: States in which the guest executes (and may write its disks). NOTE: a paused
#: copy is not running: during a live migration one side is always paused
#: (pre-copy: the destination; post-copy: the source), so a migration never
#: shows two running copies.
RUNNING_STATES = frozenset({DomainState.RUNNING, DomainState.BLOCKED, DomainState.SHUTDOWN})


def running_copies(domains_by_host: Mapping[str, Sequence[Domain]]) -> dict[str, list[str]]:
    """For each UUID running on two or more hosts, those hosts (sorted)."""
    hosts_of: dict[str, list[str]] = {}
    for host, domains in domains_by_host.items():
        for domain in domains:
            if domain.state in RUNNING_STATES:
                hosts_of.setdefault(domain.uuid, []).append(host)
    return {u: sorted(hosts) for u, hosts in hosts_of.items() if len(hosts) >= 2}


def classify_fleet(
    domains_by_host: Mapping[str, Sequence[Domain]],
    views: Mapping[str, NovaView],
    deny: Selector | None = None,
) -> dict[str, list[Finding]]:
    """Findings per host: each host classified alone, split-brain copies replaced.

    A UUID running on several hosts is ``split-brain`` on each of them, whichever
    host Nova points to; a UUID defined on several hosts but running on at most
    one keeps each copy's own classification. Split-brain findings come first.
    """
    split = running_copies(domains_by_host)
    return {
        host: _with_split_brain(host, domains, views[host], split, deny)
        for host, domains in domains_by_host.items()
    }


def _with_split_brain(
    host: str,
    domains: Sequence[Domain],
    view: NovaView,
    split: Mapping[str, list[str]],
    deny: Selector | None,
) -> list[Finding]:
    # NOTE: classify sees every domain of the host, split-brain ones included,
    # so that a server Nova places here is not mistaken for "lost".
    running_here = [d for d in domains if d.uuid in split and d.state in RUNNING_STATES]
    replaced = {d.uuid for d in running_here}
    findings = [f for f in classify(domains, view, deny) if f.uuid not in replaced]
    findings += [_split_brain(d, view, split[d.uuid]) for d in running_here]
    order = list(Kind)
    return sorted(findings, key=lambda f: (order.index(f.kind), f.uuid))


def _split_brain(domain: Domain, view: NovaView, hosts: list[str]) -> Finding:
    # NOTE: the deny list does not hide a split-brain: it is an alarm, never acted on.
    server = view.servers_here.get(domain.uuid) or view.lookups.get(domain.uuid)
    if server is None:
        nova_says = "Nova has no record of it"
    elif server.deleted:
        nova_says = "Nova has it only as deleted"
    else:
        nova_says = f"Nova places it on {server.host or 'no host'}"
    reason = f"running on {len(hosts)} hosts at once ({', '.join(hosts)}); {nova_says}"
    brief = f"running on {len(hosts)} hosts"
    return Finding(domain.uuid, domain.name, Kind.SPLIT_BRAIN, reason, domain, server, brief=brief)
