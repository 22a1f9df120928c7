"""The agent's view of its host's domains, kept between cycles and brought up to date.

A full read (``LibvirtObserver.look``) costs one ``XMLDesc`` and one or two
``metadata`` calls per domain, each a round trip to libvirtd. Between cycles few
domains change, so the view keeps each domain's definition (what its XML and its
Nova metadata say) and, each cycle, reads afresh only:

- the bulk listing (state, persistence, what each domain consumes: two calls for
  the whole host) and the job of each running domain, as a full read does;
- the XML and metadata of a domain that is new, that libvirt sent an event about
  (any domain event: lifecycle, metadata, device added or removed, disk change,
  block job…) or whose marker in the bulk listing changed (its name, whether it
  runs, its disks' targets and sources).

The next cycle is a full read whenever the view is in doubt: the first cycle on a
connection (after a start or a reconnect), a connection libvirt closed (keepalive,
libvirtd restarted), an event loop that stopped answering, a cycle whose read
failed, a fresh look (re-verification, docs/design.md rule 5) that disagreed with
the view, and one cycle in ``libvirt_full_look_every`` in any case; a connection whose driver
sends no domain events is read in full every cycle. Re-verification before
a step is always a fresh read of its own (``look_up``), never the view.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator

from nova_orphans import model, virt
from nova_orphans.classify.identity import LibvirtIdentity
from nova_orphans.config.agent import LIBVIRT_FULL_LOOK_EVERY
from nova_orphans.observe import errors
from nova_orphans.observe.hypervisor import Definition, LibvirtObserver

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LastRead:
    """How the view read libvirt in its last cycle."""

    #: Whether every domain's XML was read (a full read).
    full: bool
    #: Why it was a full read (None for an incremental one).
    why: str | None
    #: The UUIDs of the domains whose XML and metadata were read.
    definitions_read: frozenset[str]


class LibvirtView:
    """The host's domains for the agent's cycles, over one read-only connection kept open.

    Use ``session()`` as the agent's ``open_hypervisor``; ``close()`` when the agent stops.
    """

    def __init__(
        self,
        uri: str,
        libvirt_full_look_every: int = LIBVIRT_FULL_LOOK_EVERY,
        open_observer: Callable[[str], LibvirtObserver] = LibvirtObserver.open,
    ) -> None:
        self._uri = uri
        self._full_every = max(1, libvirt_full_look_every)
        self._open_observer = open_observer
        self._observer: LibvirtObserver | None = None
        self._watching: list[int] = []
        self._generation = 0
        self._kept: dict[str, Definition] = {}
        self._lock = threading.Lock()
        self._changed: set[str] = set()
        self._doubt: str | None = "the first read"
        self._since_full = 0
        self._closed: str | None = None
        self._unwatched: str | None = None
        self.last_read: LastRead | None = None

    @property
    def uri(self) -> str:
        """The URI the view reads."""
        return self._uri

    @contextlib.contextmanager
    def session(self) -> Iterator[LibvirtView]:
        """This view for one cycle, connected first when it is not; the connection stays
        open after it. A libvirt failure inside drops the connection (the next cycle
        connects again and reads in full)."""
        self._connect()
        try:
            yield self
        except errors.HypervisorError as exc:
            self._drop(f"libvirt failed: {exc}")
            raise

    def close(self) -> None:
        """Close the connection; the next ``session`` opens another and reads in full."""
        self._drop("the view was closed")

    def identity(self) -> LibvirtIdentity:
        """What this libvirt says it is (``LibvirtObserver.identity``), asked afresh."""
        return self._connected().identity()

    def look(self) -> tuple[model.Domain, ...]:
        """Every domain, as a full read would list it; see the module's docstring."""
        observer = self._connected()
        taken: list[str | None] = []

        def known() -> dict[str, Definition]:
            # NOTE: asked after the bulk listing: the events libvirt sent before it are
            # delivered by then; one arriving later stays for the next cycle.
            why = self._why_full()
            with self._lock:
                changed, self._changed = self._changed, set()
            taken.append(why)
            return {} if why else {u: d for u, d in self._kept.items() if u not in changed}

        try:
            read = observer.look_reusing(known)
        except errors.HypervisorError:
            self._doubt = "the last read failed"
            raise
        why = taken[0]
        before = {} if why else self._kept
        self._kept = {domain.uuid: definition for domain, definition in read}
        fresh = frozenset(domain.uuid for domain, d in read if before.get(domain.uuid) is not d)
        self.last_read = LastRead(full=bool(why), why=why, definitions_read=fresh)
        self._since_full = 0 if why else self._since_full + 1
        if why:
            LOG.info("libvirt: read every domain (%s)", why)
        return tuple(domain for domain, _ in read)

    def look_up(self, uuid: str) -> model.Domain | None:
        """A fresh read of one domain, never the view (docs/design.md rule 5); when it
        disagrees with the view, the next cycle reads in full."""
        looked = self._connected().look_up_definition(uuid)
        kept = self._kept.get(uuid)
        if looked is not None and kept is not None and not looked[1].says_the_same(kept):
            self._doubt = f"a fresh look at {uuid} disagreed with the kept view"
        return looked[0] if looked else None

    def _why_full(self) -> str | None:
        """Why this cycle must read every domain; None when the view may be brought up to date."""
        if self._doubt is not None:
            why, self._doubt = self._doubt, None
            return why
        if self._unwatched is not None:
            return self._unwatched
        if not virt.event_loop_answers(self._generation):
            return "libvirt's event loop stopped answering"
        if self._since_full + 1 >= self._full_every:
            return f"one cycle in {self._full_every}"
        return None

    def _connect(self) -> None:
        """Open and watch the connection unless it is open and its event loop runs."""
        closed, self._closed = self._closed, None
        if closed is not None:
            self._drop(f"libvirt closed the connection: {closed}")
        if self._observer is not None and virt.event_loop_answers(self._generation):
            return
        if self._observer is not None:
            self._drop("libvirt's event loop stopped answering")
        self._generation = virt.start_event_loop()
        observer = self._open_observer(self._uri)
        try:
            self._watching = observer.host.watch(self._on_event, self._on_close)
            self._unwatched = None
        except virt.Error as err:
            # NOTE: without events nothing tells the view what changed: every cycle of
            # this connection reads in full, as before the view.
            self._unwatched = f"libvirt sends no domain events here ({err.reason})"
            LOG.warning(
                "libvirt %s: %s; every cycle reads every domain", self._uri, self._unwatched
            )
        self._observer = observer

    def _connected(self) -> LibvirtObserver:
        if self._observer is None:
            raise errors.HypervisorError(uri=self._uri, reason="not connected (use session())")
        return self._observer

    def _drop(self, why: str) -> None:
        """Close the connection; what the view kept is in doubt until a full read."""
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.host.unwatch(self._watching)
            observer.close()
        self._watching = []
        self._kept = {}
        self._doubt = why

    def _on_event(self, uuid: str) -> None:
        with self._lock:
            self._changed.add(uuid)

    def _on_close(self, why: str) -> None:
        # NOTE: called from the event loop's thread; the next session connects again.
        LOG.warning("libvirt %s: %s; the next cycle connects again", self._uri, why)
        self._closed = why
