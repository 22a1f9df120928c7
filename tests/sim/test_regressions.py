"""Histories the simulation found breaking an invariant, replayed step by step.

Each test is named for the history (seed, index) that found it and replays the
minimal history the shrinker left; ``python -m nova_orphans.sim --seed S --index I``
replays the original (with the generator of the commit that found it). Each was a
strict xfail until the product fix named in its docstring.
"""

from __future__ import annotations

import pytest

from nova_orphans.sim import checks, trial
from nova_orphans.sim.steps import Cycle, Event, History, Setup


def invariants(history: History) -> set[str]:
    return {v.invariant for v in trial.replay(history).violations}


def test_seed_1_index_392_a_failed_file_move_leaves_the_reaped_guest_restorable():
    """A file move that raised left the guest undefined with no journal entry.

    Fixed by d660dbb: the quarantine entry is journaled as soon as the domain is undefined.
    """
    history = History(
        seed=1,
        index=392,
        setup=Setup(
            interval=300.0,
            actions=(("deleted", "reap"), ("unknown", "log"), ("misplaced", "log")),
            grace_period=300.0,
            sightings_required=1,
            reap_delay=0.0,
            max_actions_per_cycle=2,
            max_orphan_fraction=0.5,
            brake_min_orphans=100,
            page_size=5,
            retry_attempts=3,
        ),
        steps=(
            Event(at=106.5, op="boot_here", label="s7", arg="running"),
            Event(at=711.6, op="boot_here", label="s8", arg="stopped"),
            Event(at=2080.9, op="local_delete", label="s8"),
            Cycle(at=3600.0, fail=("move_instance_files",)),
        ),
    )
    assert checks.RESTORE not in invariants(history)


def test_directed_post_migrating_source_with_empty_migration_listings_is_left_alone():
    """Empty /os-migrations answers hid a live migration still cleaning up its source.

    Found by a directed history: request 3 is the scan's /os-migrations (request 0 is the
    identity check's node search), the others are the re-verification's; before a28630a two
    empty answers got the source reaped. Fixed by a28630a: re-verification reads two
    endpoints and the server's own live migrations.
    """
    history = History(
        seed=0,
        index=0,
        setup=Setup(interval=60.0, actions=(("misplaced", "reap"),), page_size=3),
        steps=(
            Event(at=1.0, op="boot_here", label="s1"),
            Event(at=2.0, op="boot_here", label="s2"),
            Event(at=3.0, op="live_migrate", label="s2", arg="start"),
            Event(at=4.0, op="migration_ends", label="s2", arg="post"),
            Cycle(at=60.0, nova_faults=tuple((n, "empty") for n in range(3, 17))),
        ),
    )
    assert checks.SAFETY not in invariants(history)


def test_post_migrating_source_with_one_empty_migration_listing_is_left_alone():
    # The same history with one fault: re-verification catches it.
    history = History(
        seed=0,
        index=0,
        setup=Setup(interval=60.0, actions=(("misplaced", "reap"),), page_size=3),
        steps=(
            Event(at=1.0, op="boot_here", label="s1"),
            Event(at=2.0, op="boot_here", label="s2"),
            Event(at=3.0, op="live_migrate", label="s2", arg="start"),
            Event(at=4.0, op="migration_ends", label="s2", arg="post"),
            Cycle(at=60.0, nova_faults=((3, "empty"),)),
        ),
    )
    result = trial.replay(history)
    assert result.violations == []
    assert result.counters.skipped == 1


@pytest.mark.parametrize("second", range(5, 17))
def test_seed_1_index_8362_two_empty_lookups_do_not_turn_a_shelved_leftover_unknown(second):
    """Two empty lookups made a shelved-offloaded leftover look unknown, and it was reaped.

    Request 4 is the scan's lookup of s3 (request 0 is the identity check's node search);
    the history found it with request 7 (then the re-verification's lookup) empty too.
    Fixed by a28630a (re-verification through two endpoints); every second fault in the
    re-verification is tried.
    """
    history = History(
        seed=1,
        index=8362,
        setup=Setup(
            interval=300.0,
            actions=(("deleted", "log"), ("unknown", "reap"), ("misplaced", "stop")),
            grace_period=0.0,
            sightings_required=1,
            reap_delay=0.0,
            max_actions_per_cycle=3,
            max_orphan_fraction=1.0,
            brake_min_orphans=100,
            page_size=4,
            retry_attempts=1,
        ),
        steps=(
            Event(at=8.6, op="boot_here", label="s1", arg="running"),
            Event(at=27.4, op="boot_here", label="s3", arg="running"),
            Event(at=30.3, op="boot_here", label="s4", arg="running"),
            Event(at=74.6, op="boot_here", label="s6", arg="running"),
            Event(at=1665.2, op="shelve", label="s3", arg="cleanup_failed"),
            Event(at=4509.2, op="boot_here", label="s10", arg="running"),
            Event(at=4675.4, op="resize", label="s10", arg="resize"),
            Event(at=4685.6, op="boot_here", label="s11", arg="running"),
            Cycle(
                at=5400.0,
                nova_faults=((4, "empty"), (second, "empty")),
                reads=((1, "db_restore"),),
            ),
        ),
    )
    assert checks.SAFETY not in invariants(history)


def test_seed_1_index_9024_a_purge_does_not_hide_the_stop_the_operator_undid():
    """The agent stopped s2; its reap failed to keep the guest's state (the guest stayed
    defined); retention purged that reap's directory; the operator then started s2. The
    purge was the guest's last journaled step, so the start was not seen as the operator
    undoing a stop, and the agent stopped and reaped s2 again (docs/design.md rule 12).

    Fixed in this commit: ``Journal.last_live_steps`` leaves purges out.
    """
    history = History(
        seed=1,
        index=9024,
        setup=Setup(
            interval=300.0,
            actions=(("deleted", "reap"), ("unknown", "log"), ("misplaced", "reap")),
            grace_period=900.0,
            max_actions_per_cycle=2,
            brake_min_orphans=2,
            retention=600.0,
        ),
        steps=(
            Event(at=17.7, op="boot_here", label="s2", arg="running"),
            Event(at=64.3, op="boot_here", label="s4", arg="running"),
            Event(at=2027.6, op="local_delete", label="s2"),
            Cycle(at=3000.0, nova_faults=((0, "repeat-page"), (6, "drop-page"))),
            Cycle(at=3300.0, fail=("keep_state",)),
            Event(at=3736.4, op="resize", label="s4", arg="resize"),
            Cycle(at=3900.0),
            Event(at=3900.9, op="virsh_start", label="s2"),
            Event(at=5090.6, op="revert", label="s4"),
            Cycle(at=5100.0, fail=("purge",)),
        ),
    )
    assert invariants(history) == set()


def test_seed_1_index_4116_a_clock_step_before_the_first_sighting_does_not_shorten_retention():
    """An unknown guest reaped, the agent's clock stepped 39 minutes ahead after a crash:
    the quarantine directory was first seen "old" and purged 20 minutes after the reap,
    under a 50-minute retention (so was index 6781 and 8044 of seed 1).

    Fixed by the retention needing its whole length in cycles from the first sighting.
    """
    history = History(
        seed=1,
        index=4116,
        setup=Setup(
            interval=600.0,
            actions=(("deleted", "log"), ("unknown", "reap"), ("misplaced", "log")),
            grace_period=300.0,
            sightings_required=1,
            reap_delay=1500.0,
            max_actions_per_cycle=3,
            max_orphan_fraction=1.0,
            brake_min_orphans=100,
            page_size=3,
            retry_attempts=3,
            retention=3000.0,
            max_limit=1,
        ),
        steps=(
            Event(at=3724.5, op="boot_here", label="s7", arg="stopped"),
            Event(at=4209.2, op="local_delete", label="s7", arg=""),
            Event(at=5575.2, op="boot_here", label="s9", arg="running"),
            Event(at=10442.8, op="archive", label="", arg=""),
            Cycle(at=10800.0, fail=("stop",)),
            Cycle(at=11400.0),
            Cycle(at=12000.0),
            Cycle(at=12600.0, crash=(5, "before")),
            Event(at=13199.5, op="clock", label="", arg="2318"),
            Cycle(at=13800.0),
        ),
    )
    assert checks.RESTORE not in invariants(history)


def test_seed_20240401_index_177_an_incremental_cycle_with_a_cell_down_fails_closed():
    """A server migrated into a cell that then stopped answering looked unchanged to the
    incremental view (Nova skips a down cell in the cloud-wide change listing), so its
    leftover domain looked managed here.

    Fixed with the incremental cycles themselves: they need every cell to answer
    (docs/design.md rule 17; ``NovaObserver.finish(every_cell=True)``).
    """
    history = History(
        seed=20240401,
        index=177,
        setup=Setup(
            interval=600.0,
            actions=(("deleted", "reap"), ("unknown", "stop"), ("misplaced", "reap")),
            sightings_required=1,
            max_actions_per_cycle=2,
            max_orphan_fraction=0.75,
            brake_min_orphans=2,
            page_size=4,
            retention=3000.0,
        ),
        steps=(
            Event(at=563.0, op="boot_here", label="s4", arg="running"),
            Cycle(at=1200.0, reads=((0, "toggle"),), crash=(1, "before"), fail=("purge",)),
            Event(at=1261.7, op="live_migrate", label="s4", arg="cleanup_failed:running"),
            Cycle(at=1800.0, reads=((3, "migrate"),), cell_down="cmp-2"),
        ),
    )
    assert checks.CLASSIFICATION not in invariants(history)


def test_seed_20240401_index_848_a_delete_and_archive_between_cycles_is_never_acted_on():
    """A server deleted and archived between two cycles changes no row ``changes-since``
    could list: until the next full look the incremental view still holds it as Nova's
    (docs/design.md §8): the classification invariant excuses that, and safety (never acted
    on, while held as Nova's) holds."""
    history = History(
        seed=20240401,
        index=848,
        setup=Setup(
            interval=300.0,
            actions=(("deleted", "reap"), ("unknown", "reap"), ("misplaced", "reap")),
            page_size=4,
        ),
        steps=(
            Event(at=20.0, op="boot_here", label="s2", arg="running"),
            Cycle(at=5100.0),
            Event(at=5181.0, op="local_delete", label="s2"),
            Event(at=5275.0, op="archive", label="s2"),
            Cycle(at=5400.0),
        ),
    )
    assert invariants(history) == set()


def test_seed_7_index_858_a_delete_and_archive_between_cycles_excuses_until_the_full_look():
    """The same blind spot as index 848, with cycles every interval after it: the guest,
    truly ``unknown`` (action stop), is held as Nova's until the next full look, then
    needs its ``sightings_required`` cycles. Liveness ran its clock from the archive,
    as if the agent could have seen it: a false liveness violation (the agent stopped it
    in time from the full look). Fixed in the simulation's liveness check, which now
    excuses, as the classification invariant does, a guest the carried view holds as
    Nova's (docs/design.md §8).
    """
    history = History(
        seed=7,
        index=858,
        setup=Setup(
            interval=60.0,
            actions=(("deleted", "stop"), ("unknown", "stop"), ("misplaced", "reap")),
            sightings_required=3,
            max_actions_per_cycle=2,
            max_orphan_fraction=0.75,
            brake_min_orphans=100,
            page_size=2,
            max_limit=1,
        ),
        steps=(
            Event(at=5.0, op="boot_here", label="s3", arg="running"),
            Event(at=9.0, op="boot_here", label="s4", arg="running"),
            Cycle(at=60.0),
            Event(at=130.0, op="local_delete", label="s4"),
            Event(at=131.0, op="archive"),
            *(Cycle(at=60.0 * n) for n in range(2, 11)),
        ),
    )
    result = trial.replay(history)
    assert {v.invariant for v in result.violations} == set()
    assert result.counters.stops == 1


def test_seed_20240401_index_0_a_deleted_guest_still_here_keeps_its_port_and_allocation():
    """A guest Nova deleted while the host was down, still defined here (its kind only
    logged): the agent told ``port unset --host`` of the port it holds and an allocation
    unset of what it uses (invariant 16). Fixed by 1a71ce9: as its files and its volume's
    attachment, a guest's port and allocation are no leftover while its domain is defined
    here (its finding tells it), as a carried look already had it.
    """
    history = History(
        seed=20240401,
        index=0,
        setup=Setup(
            interval=60.0,
            actions=(("deleted", "log"), ("unknown", "reap"), ("misplaced", "log")),
            reap_delay=150.0,
            max_actions_per_cycle=2,
            max_orphan_fraction=0.5,
            brake_min_orphans=3,
            page_size=5,
            retention=300.0,
            max_limit=2,
            stop_shared_volume_at_once=True,
            leftover_grace_period=0.0,
            cinder_page=2,
            leaks=True,
            leak_seed=965085379,
        ),
        steps=(
            Event(at=197.7, op="boot_here", label="s8", arg="stopped"),
            Event(at=298.1, op="local_delete", label="s8"),
            Event(at=395.8, op="boot_here", label="s9", arg="running"),
            Cycle(at=480.0, fail=("stop",)),
        ),
    )
    result = trial.replay(history)
    assert result.violations == []
    assert result.counters.leftovers.looks == 1 and result.counters.leftovers.ports == 0


def test_seed_20240401_index_390_a_dropped_page_of_migrations_tells_nova_s_audit_not_an_unset():
    """Nova's migration listing silently skipped a page (``drop-page``: the page after
    comes instead), so the leftovers' look did not see s8's resize away (awaiting confirm),
    whose migration holds the source's allocation here; no server has that UUID. The agent
    told ``allocation unset`` of the migration's allocation on its first sighting (invariant
    16). A consumer of no record Nova has is now told ``nova-manage placement audit`` of the
    proven provider, which reads Nova's database (its migrations included) before anything
    is removed: no told step rests on a look that may have missed a migration.
    """
    history = History(
        seed=20240401,
        index=390,
        setup=Setup(
            interval=600.0,
            actions=(("deleted", "log"), ("unknown", "reap"), ("misplaced", "stop")),
            max_actions_per_cycle=3,
            page_size=5,
            retry_attempts=3,
            retention=1200.0,
            max_limit=2,
            api_clock_offset=600.0,
            leftover_grace_period=0.0,
            neutron_page=3,
            cinder_page=1,
            leaks=True,
            leak_seed=464792259,
        ),
        steps=(
            Event(at=100.5, op="boot_here", label="s1", arg="running"),
            Event(at=133.7, op="boot_other", label="s3", arg="running"),
            Event(at=1205.3, op="boot_here", label="s5", arg="running"),
            Event(at=2048.3, op="local_delete", label="s5"),
            Event(at=3188.3, op="resize", label="s1", arg="resize"),
            Event(at=5166.6, op="boot_here", label="s8", arg="running"),
            Event(at=6391.4, op="resize", label="s8", arg="resize"),
            Event(at=8059.0, op="resize_in", label="s3"),
            Event(at=9733.8, op="boot_here", label="s11", arg="running"),
            Event(at=9976.8, op="boot_here", label="s12", arg="stopped"),
            Event(at=12134.1, op="boot_here", label="s13", arg="running"),
            Event(at=13683.9, op="soft_delete", label="s12"),
            Event(at=13922.6, op="boot_here", label="s14", arg="stopped"),
            Cycle(
                at=14400.0,
                nova_faults=((8, "500"), (9, "drop-page"), (14, "empty")),
                reads=((4, "drop"),),
            ),
        ),
    )
    result = trial.replay(history)
    assert result.violations == []
