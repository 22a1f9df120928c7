"""Errors raised by the observers.

Every observer failure is an ``ObserveError``: the cycle that sees one does
nothing but report it (fail closed).
"""

from __future__ import annotations

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError


class ObserveError(NovaOrphansError):
    """Base class: something could not be observed; nothing may be concluded."""

    msg_fmt = "observation failed"
    exit_code = exits.ERROR


class NovaError(ObserveError):
    msg_fmt = "Nova: %(reason)s"


class NovaUnreachable(NovaError):
    msg_fmt = "Nova unreachable at %(endpoint)s: %(reason)s"


class KeystoneError(NovaError):
    """Keystone, the identity service Nova's token comes from, failed: it is named, never Nova."""

    msg_fmt = (
        "Keystone (the identity service) at %(auth_url)s: %(reason)s (so Nova cannot be asked)"
    )


class KeystoneUnreachable(KeystoneError):
    msg_fmt = "Keystone unreachable at %(auth_url)s (so Nova cannot be asked): %(reason)s"


class KeystoneAuthFailed(KeystoneError):
    msg_fmt = (
        "Keystone (the identity service) at %(auth_url)s refused our credentials "
        "(HTTP %(status)s): %(reason)s"
    )


class NovaAuthFailed(NovaError):
    msg_fmt = "Nova refused our credentials (HTTP %(status)s): %(reason)s"


class NovaForbidden(NovaAuthFailed):
    """Nova's policy denies one request to valid credentials (HTTP 403).

    Nova's answer names the policy rule ("Policy doesn't allow os_compute_api:... to be
    performed."): the message keeps it, with the request, so the operator knows which rule
    the credentials lack (see nova_orphans/data/nova-policy.yaml).
    """

    msg_fmt = "Nova denied GET %(request)s (HTTP 403): %(reason)s"


class NovaBadAnswer(NovaError):
    msg_fmt = "Nova gave an unusable answer to %(request)s: %(reason)s"


class NovaCellDown(NovaError):
    """A cell did not answer Nova: its records came back partial (docs/design.md rule 17)."""

    msg_fmt = "Nova could not reach a cell: %(what)s"


class HypervisorError(ObserveError):
    msg_fmt = "libvirt %(uri)s: %(reason)s"


class HypervisorUnreachable(HypervisorError):
    msg_fmt = "libvirt unreachable at %(uri)s: %(reason)s"


class IdentityMismatch(ObserveError):
    """The libvirt read is not the hypervisor Nova calls the host (docs/design.md rule 10)."""

    msg_fmt = "%(reason)s"
