"""libvirt's failures as our errors: what each error code means to us, in one place.

Every call of the seam that fails raises ``Error`` (libvirt's message on one line, and
what its code says: the domain is gone, the driver does not support the call, the call
is invalid in the domain's present state); a connection that cannot be opened raises
``Unreachable``. ``raises_error`` is how a verb of the seam turns libvirt's exception
into ``Error``; the predicates on libvirt's own exception serve the seam's fallbacks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import libvirt

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError, one_line

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Error codes with which a driver rejects a flag it does not know or support.
_FLAG_REJECTED = frozenset(
    getattr(libvirt, name)
    for name in ("VIR_ERR_INVALID_ARG", "VIR_ERR_NO_SUPPORT", "VIR_ERR_ARGUMENT_UNSUPPORTED")
    if hasattr(libvirt, name)
)


class Error(NovaOrphansError):
    """A libvirt call failed: ``reason`` says why in one line, the properties what its
    error code means."""

    msg_fmt = "%(reason)s"
    exit_code = exits.ERROR

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason=reason, code=code)

    @classmethod
    def of(cls, err: libvirt.libvirtError) -> Error:
        """libvirt's exception as ours."""
        return cls(one_line(err.get_error_message() or err), err.get_error_code())

    @property
    def reason(self) -> str:
        """libvirt's message on one line."""
        return str(self.kwargs["reason"])

    @property
    def gone(self) -> bool:
        """The domain does not exist (any more)."""
        return bool(self.kwargs["code"] == libvirt.VIR_ERR_NO_DOMAIN)

    @property
    def unsupported(self) -> bool:
        """The driver does not support the call at all (the test driver's job info)."""
        return bool(self.kwargs["code"] == libvirt.VIR_ERR_NO_SUPPORT)

    @property
    def invalid_now(self) -> bool:
        """libvirt refuses the call in the domain's present state."""
        return bool(self.kwargs["code"] == libvirt.VIR_ERR_OPERATION_INVALID)


class Unreachable(NovaOrphansError):
    """No connection to libvirt at ``uri``; ``reason`` says why, in one line."""

    msg_fmt = "libvirt unreachable at %(uri)s: %(reason)s"
    exit_code = exits.ERROR

    @property
    def reason(self) -> str:
        """Why the connection failed."""
        return str(self.kwargs["reason"])


def raises_error(call: Callable[_P, _R]) -> Callable[_P, _R]:
    """``call``, raising ``Error`` where libvirt raised its own exception."""

    @functools.wraps(call)
    def translated(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return call(*args, **kwargs)
        except libvirt.libvirtError as err:
            raise Error.of(err) from err

    return translated


def rejects_flag(err: libvirt.libvirtError) -> bool:
    """True when the driver rejects a flag it does not know or support."""
    return err.get_error_code() in _FLAG_REJECTED


def no_metadata(err: libvirt.libvirtError) -> bool:
    """True when the domain has no metadata element in the namespace asked."""
    return bool(err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN_METADATA)
