"""Re-verification (docs/design.md rule 5) compares the domain's definition too.

Between full reads the agent decides on its kept view of libvirt; a step acts only when
the fresh read before it shows the definition the decision was made on: the same Nova
metadata, disks and interfaces (on which the dangers were judged).
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from nova_orphans.model import Disk, Interface, Kind
from tests.agent.simworld import SimWorld

VOLUME = Disk("vdb", "disk", "block", "/dev/disk/by-id/volume", serial="a-cinder-volume")
PORT = Interface("bridge", "fa:16:3e:00:00:01", "tap0", "br-int")


@pytest.mark.parametrize(
    "change",
    [
        lambda d: {"disks": (*d.disks, VOLUME)},
        lambda d: {"interfaces": (*d.interfaces, PORT)},
        lambda d: {"metadata": dataclasses.replace(d.metadata, display_name="someone-else")},
    ],
    ids=["a disk attached", "an interface attached", "its Nova metadata rewritten"],
)
def test_a_definition_changed_between_scan_and_action_skips_the_step(
    tmp_path: pathlib.Path, change
) -> None:
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)

    def redefine(what: str) -> None:
        if what.startswith("lookup"):
            world.hv.change(gone, **change(world.hv.domains[gone]))

    world.hv.before_read = redefine
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["skipped"]
    assert "definition" in result.outcomes[0].detail
    assert world.touched() == set()


def test_an_unchanged_definition_lets_the_step_proceed(tmp_path: pathlib.Path) -> None:
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    result = world.cycle()
    assert [(o.uuid, o.outcome) for o in result.outcomes] == [(gone, "done")]
