"""docs/design.md rule 22: a command the tool prints is a step; ``decide/told.py`` writes it only
when every proof holds, and otherwise tells the leftover with ``held_by`` and ``why``."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import pathlib
import re

import pytest

from nova_orphans.classify.leftover import Held, Leftover, LeftoverKind, Leftovers, Remedy, Verb
from nova_orphans.decide import told
from nova_orphans.decide.gate import SafetyVerdict
from nova_orphans.model import NovaView, Server

NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
HOST = "cmp-1"
NODE = "0e0e0e0e-0000-4000-8000-00000000000e"
SERVER = "5e5e5e5e-0000-4000-8000-000000000005"
PORT = "90909090-0000-4000-8000-000000000009"
ATTACHMENT = "a7a7a7a7-0000-4000-8000-00000000000a"
CLEAR = SafetyVerdict(True, "identity verified, no brake, every look succeeded")
ROOT = pathlib.Path(__file__).resolve().parents[3]


def item(verb: Verb, **remedy: str) -> Leftover:
    kind = {
        Verb.REMOVE_FILES: LeftoverKind.FILES,
        Verb.UNBIND_PORT: LeftoverKind.PORT,
        Verb.REBIND_PORT: LeftoverKind.PORT,
        Verb.DELETE_ATTACHMENT: LeftoverKind.ATTACHMENT,
        Verb.UNSET_ALLOCATION: LeftoverKind.ALLOCATION,
        Verb.AUDIT_ALLOCATIONS: LeftoverKind.ALLOCATION,
        Verb.HEAL_ALLOCATION: LeftoverKind.ALLOCATION,
    }[verb]
    target = {Verb.REMOVE_FILES: SERVER, Verb.DELETE_ATTACHMENT: ATTACHMENT}.get(verb, PORT)
    if kind is LeftoverKind.ALLOCATION:
        target = SERVER
    subject = f"/var/lib/nova/instances/{SERVER}" if kind is LeftoverKind.FILES else target
    return Leftover(kind, subject, SERVER, "Nova deleted it", Remedy(verb, target, **remedy))


EVERY = (
    item(Verb.REMOVE_FILES),
    item(Verb.UNBIND_PORT),
    item(Verb.REBIND_PORT, host="cmp-2"),
    item(Verb.DELETE_ATTACHMENT),
    item(Verb.UNSET_ALLOCATION, provider=NODE),
    item(Verb.AUDIT_ALLOCATIONS, provider=NODE),
    item(Verb.HEAL_ALLOCATION, provider=NODE),
)


def proofs(found: Leftovers, **changes: object) -> told.Proofs:
    """Every proof holding: seen long enough, nothing held, the node and paths known."""
    base = told.Proofs(
        verdict=CLEAR,
        host=HOST,
        now=NOW,
        sightings=told.next_sightings({}, found, NOW - datetime.timedelta(hours=2), 600),
        required=1,
        grace=datetime.timedelta(hours=1),
        node_uuid=NODE,
        files_root="/var/lib/nova/instances",
        attachment_hosts={ATTACHMENT: HOST},
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def tell(items: tuple[Leftover, ...] = EVERY, **changes: object) -> tuple[Leftover, ...]:
    found = Leftovers(items, looked_at=NOW)
    return told.tell(found, proofs(found, **changes)).items


def test_with_every_proof_each_leftover_gets_its_least_destructive_command() -> None:
    commands = [i.command for i in tell()]
    assert commands == [
        f"rm -r -- /var/lib/nova/instances/{SERVER}",
        f"openstack port unset --host {PORT}",
        f"openstack port set --host cmp-2 {PORT}",
        f"openstack --os-volume-api-version 3.27 volume attachment delete {ATTACHMENT}",
        "openstack --os-placement-api-version 1.12 resource provider allocation unset "
        f"--provider {NODE} {SERVER}",
        f"nova-manage placement audit --resource_provider {NODE} --verbose",
        f"nova-manage placement heal_allocations --instance {SERVER}",
    ]
    assert all(i.held_by is None and i.why is None for i in tell())


WITHHELD = [
    ("the gate is not clear (identity unproven)",
     dict(verdict=SafetyVerdict(False, "identity not proven: no compute_id")), Held.GATE,
     "identity not proven"),
    ("the server has a live quarantine entry",
     dict(quarantined={SERVER: "/q/x (reaped 20240101T000000Z)"}), Held.QUARANTINE,
     "quarantine entry /q/x"),
    ("the server is on hold", dict(holds={SERVER: "started by someone"}), Held.HOLD,
     "on hold"),
    ("the server is deny-listed", dict(denied=frozenset({SERVER})), Held.DENY, "deny-listed"),
    ("not seen in enough looks", dict(required=3), Held.PENDING, "seen in 1 of 3 looks"),
    ("not seen across the grace period", dict(grace=datetime.timedelta(days=1)), Held.PENDING,
     "of 24 h"),
    ("not seen at all", dict(sightings={}), Held.PENDING, "seen in 0 of 1 looks"),
]  # fmt: skip


@pytest.mark.parametrize("proof, changes, held, why", WITHHELD, ids=[case[0] for case in WITHHELD])
def test_one_missing_proof_withholds_every_command_and_says_why(
    proof: str, changes: dict[str, object], held: Held, why: str
) -> None:
    for found in tell(**changes):
        assert found.command is None, (proof, found)
        assert found.held_by is held
        assert found.why and why in found.why


def test_files_a_quarantine_entry_needs_are_kept_for_it() -> None:
    files = tell(quarantined={SERVER: "/q/x (reaped 20240101T000000Z)"})[0]
    assert files.why == "kept for quarantine entry /q/x (reaped 20240101T000000Z)"


def test_an_allocation_on_a_provider_that_is_not_the_proven_node_gets_no_command() -> None:
    other = "0f0f0f0f-0000-4000-8000-00000000000f"
    for found in tell(node_uuid=other)[4:]:
        assert (found.command, found.held_by) == (None, Held.PROVIDER)
        assert f"not the proven compute node {other}" in (found.why or "")
    for found in tell(node_uuid=None)[4:]:
        assert (found.command, found.held_by) == (None, Held.PROVIDER)


@pytest.mark.parametrize(
    "hosts, why",
    [
        ({ATTACHMENT: "cmp-9"}, "host 'cmp-9''s connector"),
        ({ATTACHMENT: None}, "no connector Cinder names"),
        ({}, "no connector Cinder names"),
        ("Cinder answered GET /volumes/x with HTTP 500", "HTTP 500"),
    ],
)
def test_an_attachment_gets_a_command_only_through_this_host_s_connector(
    hosts: object, why: str
) -> None:
    found = tell(attachment_hosts=hosts)[3]
    assert (found.command, found.held_by) == (None, Held.OWNER)
    assert why in (found.why or "")


def test_files_get_no_command_where_the_host_s_path_is_not_known() -> None:
    found = tell(files_root=None, files_root_why="runs in a container")[0]
    assert (found.command, found.held_by, found.why) == (None, Held.PATH, "runs in a container")


def test_a_leftover_without_a_step_is_told_and_never_given_a_command() -> None:
    foreign = Leftover(LeftoverKind.FOREIGN_PORT, PORT, None, "its owner is compute:kuryr")
    (found,) = tell((foreign,))
    assert (found.command, found.held_by) == (None, Held.OWNER)


def test_a_target_that_is_no_canonical_uuid_never_reaches_a_command() -> None:
    bad = dataclasses.replace(
        EVERY[1], remedy=Remedy(Verb.UNBIND_PORT, PORT.upper() + "; rm -rf /")
    )
    (found,) = tell((bad,))
    assert found.command is None


def test_a_rebind_to_a_host_name_that_is_not_plain_is_refused() -> None:
    bad = item(Verb.REBIND_PORT, host="cmp-2; reboot")
    (found,) = tell((bad,))
    assert found.command is None


def test_an_earlier_look_s_leftovers_carry_no_command_and_keep_their_look_s_time() -> None:
    earlier = Leftovers(EVERY, looked_at=NOW - datetime.timedelta(minutes=10))
    view = NovaView(HOST, {}, {})
    carried = told.carry(earlier, domains=(), view=view)
    found = told.tell(carried, proofs(carried))
    assert found.looked_at == earlier.looked_at and found.carried
    assert all(i.command is None and i.held_by is Held.CARRIED for i in found.items)
    assert all("from the look at 2024-05-01T11:50:00+00:00" in (i.why or "") for i in found.items)


def test_a_leftover_whose_look_is_not_this_cycle_s_gets_no_command() -> None:
    found = Leftovers(EVERY, looked_at=NOW - datetime.timedelta(seconds=1))
    assert all(i.held_by is Held.CARRIED for i in told.tell(found, proofs(found)).items)


def test_a_carried_leftover_of_a_server_that_came_back_here_is_dropped() -> None:
    earlier = Leftovers(EVERY, looked_at=NOW - datetime.timedelta(minutes=10))
    back = Server(SERVER, "db", HOST, "ACTIVE", "active", None)
    view = NovaView(HOST, {SERVER: back}, {})
    assert told.carry(earlier, domains=(), view=view).items == ()
    assert told.carry(earlier, domains=(SERVER,), view=NovaView(HOST, {}, {})).items == ()


def test_sightings_count_looks_half_an_interval_apart_and_restart_on_another_step() -> None:
    found = Leftovers(EVERY[1:2], looked_at=NOW)
    first = told.next_sightings({}, found, NOW, 600)
    soon = told.next_sightings(first, found, NOW + datetime.timedelta(seconds=60), 600)
    later = told.next_sightings(soon, found, NOW + datetime.timedelta(seconds=400), 600)
    assert [next(iter(s.values())).looks for s in (first, soon, later)] == [1, 1, 2]
    rebind = Leftovers((item(Verb.REBIND_PORT, host="cmp-2"),), looked_at=NOW)
    assert next(iter(told.next_sightings(later, rebind, NOW, 600).values())).looks == 1
    assert told.next_sightings(later, Leftovers(), NOW, 600) == {}


#: The text of every command the tool can print for a leftover.
COMMAND_TEXT = re.compile(
    r"rm -r --|openstack port (?:unset|set|delete)|volume attachment delete|"
    r"allocation unset|heal_allocations --instance|placement audit"
)


def _strings(path: pathlib.Path) -> list[str]:
    """The string literals of a module, its docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_every_printed_command_is_written_in_one_module() -> None:
    """Rule 22: one path for every told step; a command written elsewhere would skip it."""
    writers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "nova_orphans").rglob("*.py")
        if any(COMMAND_TEXT.search(text) for text in _strings(path))
    )
    assert writers == ["nova_orphans/decide/told.py"], writers
