"""Table-driven tests of the classifier: one case per kind and per protection."""

from __future__ import annotations

import datetime
import uuid as uuidlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nova_orphans.classify.guests import classify
from nova_orphans.model import (
    Domain,
    DomainState,
    Kind,
    Migration,
    NovaMetadata,
    NovaView,
    Selector,
    Server,
)

HOST = "cmp-1"
U = "11111111-2222-3333-4444-555555555555"
META = NovaMetadata(namespace="http://openstack.org/xmlns/libvirt/nova/1.1", display_name="vm")
DELETED_AT = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)


def domain(uuid: str = U, meta: NovaMetadata | None = META, **kw: object) -> Domain:
    fields: dict[str, object] = dict(
        name="instance-00000001", state=DomainState.RUNNING, persistent=True, job_active=False
    )
    fields.update(kw)
    return Domain(uuid=uuid, metadata=meta, **fields)  # type: ignore[arg-type]


def server(host: str | None = HOST, **kw: object) -> Server:
    fields: dict[str, object] = dict(
        uuid=U, name="vm", status="ACTIVE", vm_state="active", task_state=None
    )
    fields.update(kw)
    return Server(host=host, **fields)  # type: ignore[arg-type]


def migration(status: str, kind: str = "live-migration", src: str = HOST, dst: str = "cmp-2"):
    return Migration(U, src, dst, kind, status, "2026-11-01T10:00:00Z")


def here(s: Server, migrations: tuple[Migration, ...] = ()) -> NovaView:
    return NovaView(HOST, {s.uuid: s}, {}, migrations)


def looked_up(s: Server | None, migrations: tuple[Migration, ...] = ()) -> NovaView:
    return NovaView(HOST, {}, {U: s}, migrations)


deleted = server(status="DELETED", vm_state="deleted", deleted=True, deleted_at=DELETED_AT)
elsewhere = server(host="cmp-2")

CASES = [
    # (description, domains, nova view, deny list, expected kind or None, words in the reason)
    (
        "a running guest whose server Nova manages here is no finding",
        [domain()],
        here(server()),
        None,
        None,
        "",
    ),
    (
        "a guest Nova deleted (row not archived) is 'deleted'",
        [domain()],
        looked_up(deleted),
        None,
        Kind.DELETED,
        "2026-11-01",
    ),
    (
        "a guest with Nova metadata and no Nova record at all is 'unknown'",
        [domain()],
        looked_up(None),
        None,
        Kind.UNKNOWN,
        "no record",
    ),
    (
        "a guest Nova runs on another host after a live migration is 'misplaced'",
        [domain()],
        looked_up(elsewhere, (migration("completed"),)),
        None,
        Kind.MISPLACED,
        "live-migration source",
    ),
    (
        "an evacuated server's old guest is 'misplaced' as an evacuation source",
        [domain()],
        looked_up(elsewhere, (migration("done", "evacuation"),)),
        None,
        Kind.MISPLACED,
        "evacuation source",
    ),
    (
        "a confirmed resize's old guest is 'misplaced' as a resize source",
        [domain()],
        looked_up(elsewhere, (migration("confirmed", "resize"),)),
        None,
        Kind.MISPLACED,
        "resize source",
    ),
    (
        "a cold-migrated server's old guest is 'misplaced' as a cold migration source",
        [domain()],
        looked_up(elsewhere, (migration("confirmed", "migration"),)),
        None,
        Kind.MISPLACED,
        "cold migration source",
    ),
    (
        "a shelved-offloaded server's guest is 'misplaced'",
        [domain()],
        looked_up(server(host=None, vm_state="shelved_offloaded", status="SHELVED_OFFLOADED")),
        None,
        Kind.MISPLACED,
        "shelved-offloaded",
    ),
    (
        "a server elsewhere with no migration record is still 'misplaced'",
        [domain()],
        looked_up(elsewhere),
        None,
        Kind.MISPLACED,
        "cmp-2",
    ),
    (
        "a guest without Nova metadata is 'foreign'",
        [domain(meta=None)],
        looked_up(None),
        None,
        Kind.FOREIGN,
        "outside Nova",
    ),
    (
        "a guest with unreadable Nova metadata is 'foreign', never Nova's",
        [domain(meta=None, metadata_error="not XML")],
        looked_up(deleted),
        None,
        Kind.FOREIGN,
        "unreadable",
    ),
    (
        "a SOFT_DELETED server's guest is protected",
        [domain()],
        looked_up(server(status="SOFT_DELETED", vm_state="soft-delete")),
        None,
        Kind.PROTECTED,
        "SOFT_DELETED",
    ),
    (
        "a guest whose server has a task_state is protected",
        [domain()],
        looked_up(server(host="cmp-2", task_state="migrating")),
        None,
        Kind.PROTECTED,
        "task_state migrating",
    ),
    (
        "a guest whose server is RESIZED is protected",
        [domain()],
        looked_up(server(host="cmp-2", vm_state="resized", status="VERIFY_RESIZE")),
        None,
        Kind.PROTECTED,
        "RESIZED",
    ),
    (
        "a guest in a running migration from this host is protected",
        [domain()],
        looked_up(elsewhere, (migration("running"),)),
        None,
        Kind.PROTECTED,
        "in progress",
    ),
    (
        "a guest in a migration to this host is protected even with no Nova record yet",
        [domain()],
        looked_up(None, (migration("preparing", src="cmp-2", dst=HOST),)),
        None,
        Kind.PROTECTED,
        "in progress",
    ),
    (
        "a resize source awaiting confirmation is protected",
        [domain()],
        looked_up(elsewhere, (migration("finished", "resize"),)),
        None,
        Kind.PROTECTED,
        "awaits confirmation",
    ),
    (
        "a deny-listed UUID is protected",
        [domain()],
        looked_up(None),
        Selector(uuids=frozenset({U})),
        Kind.PROTECTED,
        "deny-listed",
    ),
    (
        "a deny-listed name pattern is protected",
        [domain()],
        looked_up(deleted),
        Selector(name_patterns=("instance-*",)),
        Kind.PROTECTED,
        "deny-listed",
    ),
    (
        "a server Nova places here without a domain is 'lost'",
        [],
        here(server()),
        None,
        Kind.LOST,
        "no such domain",
    ),
    (
        "a server still building here without a domain is not lost",
        [],
        here(server(vm_state="building", task_state="spawning")),
        None,
        None,
        "",
    ),
    (
        "a server migrating into this host without a domain yet is not lost",
        [],
        here(server(), (migration("running", src="cmp-2", dst=HOST),)),
        None,
        None,
        "",
    ),
]


@pytest.mark.parametrize(
    ("domains", "view", "deny", "kind", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_classify(domains, view, deny, kind, words):
    findings = classify(domains, view, deny)
    if kind is None:
        assert findings == []
    else:
        assert [f.kind for f in findings] == [kind]
        assert words in findings[0].reason


# --- every reason is true: the exact sentence for each condition that produces it --------

shelved = server(host=None, vm_state="shelved_offloaded", status="SHELVED_OFFLOADED")
failed_build = server(host=None, vm_state="error", status="ERROR")

REASONS = [
    # (description, domains, nova view, deny list, the exact reason)
    (
        "a deny-listed guest is protected because the operator said so",
        [domain()],
        looked_up(deleted),
        Selector(uuids=frozenset({U})),
        "deny-listed by the operator",
    ),
    (
        "a guest without Nova metadata is said to be treated as made outside Nova",
        [domain(meta=None)],
        looked_up(None),
        None,
        "no Nova metadata in the domain XML: treated as made outside Nova",
    ),
    (
        "a guest with unreadable metadata says what could not be read",
        [domain(meta=None, metadata_error="not XML")],
        looked_up(None),
        None,
        "unreadable Nova metadata (not XML); treated as not Nova's",
    ),
    (
        "a SOFT_DELETED server can still be restored",
        [domain()],
        looked_up(server(status="SOFT_DELETED", vm_state="soft-delete")),
        None,
        "SOFT_DELETED: the server can still be restored",
    ),
    (
        "a server with a task_state names it",
        [domain()],
        looked_up(server(host="cmp-2", task_state="resize_prep")),
        None,
        "task_state resize_prep: Nova is working on this server",
    ),
    (
        "a RESIZED server may come from a resize or a cold migration",
        [domain()],
        looked_up(server(host="cmp-2", vm_state="resized", status="VERIFY_RESIZE")),
        None,
        "vm_state RESIZED: a resize or cold migration awaits confirmation",
    ),
    (
        "a cold migration in progress is called a cold migration and shows both ends",
        [domain()],
        looked_up(elsewhere, (migration("migrating", "migration"),)),
        None,
        "cold migration in progress (cmp-1 -> cmp-2, migrating)",
    ),
    (
        "a resize awaiting confirmation from this host says this host is its source",
        [domain()],
        looked_up(elsewhere, (migration("finished", "resize"),)),
        None,
        "resize awaits confirmation (cmp-1 -> cmp-2); this host is its source",
    ),
    (
        "a resize awaiting confirmation to this host says this host is its destination",
        [domain()],
        looked_up(elsewhere, (migration("finished", "resize", src="cmp-2", dst=HOST),)),
        None,
        "resize awaits confirmation (cmp-2 -> cmp-1); this host is its destination",
    ),
    (
        "a resize awaiting confirmation between two other hosts claims no role for this one",
        [domain()],
        looked_up(elsewhere, (migration("finished", "resize", src="cmp-2", dst="cmp-3"),)),
        None,
        "resize awaits confirmation (cmp-2 -> cmp-3)",
    ),
    (
        "a guest with no Nova record says only that Nova has none",
        [domain()],
        looked_up(None),
        None,
        "Nova has no record of this server, live or deleted",
    ),
    (
        "a deleted server's guest gives Nova's deletion time",
        [domain()],
        looked_up(deleted),
        None,
        "Nova deleted the server at 2026-11-01T12:00:00+00:00; the guest was left behind",
    ),
    (
        "a deleted server without a deletion time says the time is unknown",
        [domain()],
        looked_up(server(status="DELETED", vm_state="deleted", deleted=True)),
        None,
        "Nova deleted the server at an unknown time; the guest was left behind",
    ),
    (
        "a shelved-offloaded server is called shelved-offloaded",
        [domain()],
        looked_up(shelved),
        None,
        "shelved-offloaded: Nova keeps no guest on any host for it",
    ),
    (
        "an ERROR server on no host (a failed build) is not called shelved-offloaded",
        [domain()],
        looked_up(failed_build),
        None,
        "Nova places this server on no host (vm_state error): "
        "no guest of it should exist on any host",
    ),
    (
        "a live-migration source names the host Nova places the server on",
        [domain()],
        looked_up(elsewhere, (migration("completed"),)),
        None,
        "live-migration source: Nova places this server on cmp-2, not here (migration completed)",
    ),
    (
        "a failed live migration to this host leaves a destination leftover, said so",
        [domain()],
        looked_up(elsewhere, (migration("failed", src="cmp-2", dst=HOST),)),
        None,
        "live-migration destination: Nova places this server on cmp-2, not here (migration failed)",
    ),
    (
        "of several migrations from this host the latest explains the leftover",
        [domain()],
        looked_up(
            elsewhere,
            (
                Migration(U, HOST, "cmp-3", "live-migration", "error", "2026-11-01T09:00:00Z"),
                Migration(U, HOST, "cmp-2", "evacuation", "done", "2026-11-01T11:00:00Z"),
            ),
        ),
        None,
        "evacuation source: Nova places this server on cmp-2, not here (migration done)",
    ),
    (
        "a migration between two other hosts is not called this host's",
        [domain()],
        looked_up(elsewhere, (migration("completed", src="cmp-2", dst="cmp-3"),)),
        None,
        "Nova places this server on cmp-2, not here; "
        "Nova lists no migration of it touching this host",
    ),
    (
        "a server elsewhere with no migration at all says Nova lists none",
        [domain()],
        looked_up(elsewhere),
        None,
        "Nova places this server on cmp-2, not here; "
        "Nova lists no migration of it touching this host",
    ),
    (
        "a server Nova places here without a domain gives its vm_state",
        [],
        here(server(vm_state="stopped")),
        None,
        "Nova places this server here (vm_state stopped) but libvirt has no such domain",
    ),
]


@pytest.mark.parametrize(
    ("domains", "view", "deny", "reason"),
    [pytest.param(*case[1:], id=case[0]) for case in REASONS],
)
def test_reason(domains, view, deny, reason):
    (finding,) = classify(domains, view, deny)
    assert finding.reason == reason


#: The most characters of a brief reason: what a 100-column table keeps of it.
BRIEF_MAX = 32


@pytest.mark.parametrize(
    ("domains", "view", "deny", "reason"),
    [pytest.param(*case[1:], id=case[0]) for case in REASONS],
)
def test_every_reason_has_a_brief_one_that_fits_a_table(domains, view, deny, reason):
    """Each condition's few words, for the default table (docs/design.md §10)."""
    (finding,) = classify(domains, view, deny)
    assert finding.brief and finding.brief != finding.reason
    assert len(finding.brief) <= BRIEF_MAX, finding.brief


def test_findings_are_sorted_most_urgent_first():
    other = str(uuidlib.uuid4())
    view = NovaView(HOST, {}, {U: None, other: None})
    findings = classify([domain(uuid=other, meta=None), domain()], view)
    assert [f.kind for f in findings] == [Kind.UNKNOWN, Kind.FOREIGN]


# --- property: Nova-managed guests and foreign guests are never orphans -------------------

ACTIONABLE = {Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED}
uuids = st.uuids().map(str)
hosts = st.sampled_from([HOST, "cmp-2", "cmp-3", None])
vm_states = st.sampled_from(
    [
        "active",
        "stopped",
        "paused",
        "soft-delete",
        "resized",
        "shelved_offloaded",
        "error",
        "building",
        "deleted",
    ]
)
task_states = st.sampled_from([None, None, "migrating", "deleting", "resize_prep"])
statuses = st.sampled_from(["running", "completed", "finished", "error", "done", "confirmed"])
mig_types = st.sampled_from(["live-migration", "migration", "resize", "evacuation"])


@st.composite
def worlds(draw):
    ids = draw(st.lists(uuids, min_size=1, max_size=8, unique=True))
    domains, servers_here, lookups, migrations = [], {}, {}, []
    for u in ids:
        has_domain = draw(st.booleans())
        if has_domain:
            meta = draw(st.sampled_from([META, None]))
            domains.append(domain(uuid=u, meta=meta))
        record = draw(st.sampled_from(["here", "elsewhere", "deleted", "none"]))
        vm_state = draw(vm_states)
        srv = server(
            uuid=u,
            host=HOST if record == "here" else draw(hosts),
            vm_state=vm_state,
            task_state=draw(task_states),
            deleted=record == "deleted",
        )
        if record == "here" and vm_state != "soft-delete":
            servers_here[u] = srv
        elif has_domain:
            lookups[u] = None if record == "none" else srv
        for _ in range(draw(st.integers(0, 2))):
            migrations.append(
                Migration(u, draw(hosts), draw(hosts), draw(mig_types), draw(statuses))
            )
    return domains, NovaView(HOST, servers_here, lookups, tuple(migrations))


@given(worlds())
def test_managed_or_foreign_guests_are_never_actionable(world):
    domains, view = world
    by_uuid = {d.uuid: d for d in domains}
    for finding in classify(domains, view):
        if finding.kind not in ACTIONABLE:
            continue
        d = by_uuid[finding.uuid]
        assert d.metadata is not None, "a foreign guest was classed actionable"
        srv = view.servers_here.get(d.uuid) or view.lookups.get(d.uuid)
        if srv is not None and not srv.deleted:
            assert srv.host != HOST, "a guest Nova manages here was classed actionable"
            assert srv.task_state is None and srv.vm_state not in ("soft-delete", "resized")
        assert not any(
            m.instance_uuid == d.uuid
            and m.status in ("running", "finished")
            and HOST in (m.source_compute, m.dest_compute)
            for m in view.migrations
        ), "a guest in a migration touching this host was classed actionable"


@given(worlds())
def test_every_reason_claims_only_what_nova_said(world):
    domains, view = world
    for finding in classify(domains, view):
        srv, reason = finding.server, finding.reason
        ends = [
            (m.source_compute, m.dest_compute)
            for m in view.migrations
            if m.instance_uuid == finding.uuid
        ]
        if "shelved-offloaded" in reason:
            assert srv is not None and srv.vm_state == "shelved_offloaded", reason
        if "Nova deleted the server" in reason:
            assert srv is not None and srv.deleted, reason
        if "no record" in reason:
            assert srv is None, reason
        if " source:" in reason or "its source" in reason:
            assert any(src == HOST for src, _ in ends), reason
        if " destination:" in reason or "its destination" in reason:
            assert any(dst == HOST for _, dst in ends), reason
        if "Nova places this server on no host" in reason:
            assert srv is not None and srv.host is None, reason
