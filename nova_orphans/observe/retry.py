"""The one retry layer of every service the tool asks (Nova, Placement, Cinder, Neutron).

NOTE: keystoneauth can retry too (``connect_retries``, ``status_code_retries``); two layers
multiply attempts (3 times 3 requests for one failure). So keystoneauth's are off (``[nova]``
refuses them at load, the adapters are built with none) and tenacity retries here: a server
error or an unreachable service a few times, with a growing wait, then the error as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import tenacity

#: Attempts of one request (the first included), and the first wait in seconds (doubling).
ATTEMPTS = 3
WAIT_SECONDS = 1.0
#: What keystoneauth is told: no retries of its own.
NO_KEYSTONEAUTH_RETRIES = {"connect_retries": 0, "status_code_retries": 0}

T = TypeVar("T")


def retrying(
    transient: tuple[type[BaseException], ...],
    attempts: int = ATTEMPTS,
    wait_seconds: float | None = None,
) -> Callable[[Callable[[], Any]], Any]:
    """A call wrapper that retries ``transient`` errors, then re-raises the last one."""
    wait = WAIT_SECONDS if wait_seconds is None else wait_seconds
    policy = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(transient),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=wait, max=10),
        reraise=True,
    )
    return lambda call: policy(call)
