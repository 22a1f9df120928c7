"""Nova's transport with every request counted and timed in the agent's metrics."""

from __future__ import annotations

import datetime
import time
from typing import Any

from nova_orphans.observe.nova.api import Transport
from nova_orphans.record.metrics import Metrics


class MeteredTransport:
    """A Nova transport whose every request is counted and timed in the agent's metrics."""

    def __init__(self, transport: Transport, metrics: Metrics) -> None:
        self._transport, self._metrics = transport, metrics

    @property
    def date(self) -> datetime.datetime | None:
        """The wrapped transport's ``date`` (Nova's clock at its last answer), if it has one.

        NOTE: the tracker dates its changes-since from it; hidden, every cycle was a full look.
        """
        return getattr(self._transport, "date", None)

    def get(self, path: str) -> tuple[int, Any]:
        """``Transport.get``, counted by endpoint and status (``error`` when it raised)."""
        started, status = time.monotonic(), None
        try:
            answer = self._transport.get(path)
            status = answer[0]
        finally:
            self._metrics.nova_request(path, status, time.monotonic() - started)
        return answer
