"""The fresh look before each step (docs/design.md rule 5): the guest, Nova's record and its
dangers read again through the cycle's own connections, right before the actuator acts."""

from __future__ import annotations

from typing import Protocol

from nova_orphans import audit
from nova_orphans.classify import danger
from nova_orphans.model import Danger, Domain, Finding, NovaView
from nova_orphans.observe.nova.observer import NovaObserver


class OneDomain(Protocol):
    """A hypervisor observer that can read one domain afresh."""

    def look_up(self, uuid: str) -> Domain | None:
        """A fresh read of one domain; None when it does not exist."""


class FreshLook:
    """Re-verification reads through the cycle's own connections (``act.actuator``'s look)."""

    def __init__(
        self,
        hypervisor: OneDomain,
        nova: NovaObserver,
        host: str,
        services: audit.Services | None,
    ) -> None:
        self._hypervisor, self._nova, self._host = hypervisor, nova, host
        self._services = services

    def domain(self, uuid: str) -> Domain | None:
        """The domain as libvirt has it now."""
        return self._hypervisor.look_up(uuid)

    def nova(self, uuid: str) -> NovaView:
        """Nova's view of the host as it bears on ``uuid`` now."""
        return self._nova.fresh_view(self._host, uuid)

    def dangers(self, finding: Finding) -> tuple[Danger, ...]:
        """What ``finding``'s guest endangers now (none asked without the services)."""
        if self._services is None:
            return ()
        facts = self._services.dangers.look([finding])
        return danger.assess(finding, facts, self._host, ())
