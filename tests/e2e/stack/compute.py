"""nova-compute for the stack: Nova's own service, reading a provider tree's allocations lazily.

On every claim, Nova 34's resource tracker asks Placement for the allocations of every
consumer on the compute node, one ``GET /allocations/{consumer}`` each. It needs them only
to heal PCI allocations tracked in Placement (``[pci] report_in_placement``) and when the
driver asks for a reshape; the stack does neither. So a host of N servers paid N Placement
requests per build, and a 1,000-server host (the real-Nova benchmark's) took hours to build.
Here the allocations are fetched when first read: Nova makes the same decisions, and a
fetch nobody reads is skipped. (Unlike Nova's eager fetch, an unread fetch can no longer
fail a claim when Placement is down.)
"""

import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

# NOTE: nova.cmd first: importing it sets up Nova's concurrency mode before other modules load.
from nova.cmd import compute
from nova.scheduler.client import report


class LazyAllocations(Mapping[str, Any]):
    """The allocations ``fetch`` returns, fetched on first read."""

    def __init__(self, fetch: Callable[[], dict[str, Any]]) -> None:
        self._fetch = fetch
        self._allocations: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._allocations is None:
            self._allocations = self._fetch()
        return self._allocations

    def __getitem__(self, consumer: str) -> Any:
        return self._read()[consumer]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


_eager = report.SchedulerReportClient.get_allocations_for_provider_tree


def _lazy(client: Any, context: Any, nodename: str) -> LazyAllocations:
    return LazyAllocations(lambda: _eager(client, context, nodename))


report.SchedulerReportClient.get_allocations_for_provider_tree = _lazy

if __name__ == "__main__":
    sys.exit(compute.main())
