"""``python -m nova_orphans.sim``: run many seeded histories, or replay one."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence

from nova_orphans.sim import trial
from nova_orphans.sim.generate import FAULT_NAMES
from nova_orphans.sim.play import Counters
from nova_orphans.sim.steps import History


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m nova_orphans.sim",
        description="Play seeded random cloud histories through the real agent and check "
        "its invariants after every step.",
    )
    parser.add_argument("--histories", type=int, default=1000, help="how many (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the seed (default 0)")
    parser.add_argument("--first", type=int, default=0, help="index of the first history")
    parser.add_argument("--cycles", type=int, default=trial.CYCLES, help="agent cycles each")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--index", type=int, help="replay only history INDEX of --seed")
    parser.add_argument("--replay", metavar="FILE", help="replay a history saved as JSON")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=FAULT_NAMES,
        metavar="FAULT",
        help=f"never inject FAULT (repeatable): {', '.join(FAULT_NAMES)}",
    )
    parser.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")
    parser.add_argument("--save", metavar="DIR", help="write each failing minimal history here")
    return parser


def _one(job: tuple[int, int, int, frozenset[str], bool]) -> tuple[Counters, list[str], str]:
    seed, index, cycles, exclude, shrink = job
    result = trial.run_generated(seed, index, cycles, exclude)
    if not result.failed:
        return result.counters, [], ""
    smallest = trial.minimal(result) if shrink else None
    saved = (smallest or result.history).to_json()
    return result.counters, list(trial.describe(result, smallest)), saved


def main(argv: Sequence[str] | None = None) -> int:
    """Run the histories; print the summary; exit 1 when an invariant broke."""
    args = _parser().parse_args(argv)
    trial.quiet()
    if args.replay:
        with open(args.replay, encoding="utf-8") as source:
            history = History.from_json(source.read())
        result = trial.replay(history)
        for line in trial.describe(result, None) if result.failed else ["no violation"]:
            print(line)
        return 1 if result.failed else 0
    first, count = (args.index, 1) if args.index is not None else (args.first, args.histories)
    exclude = frozenset(args.without)
    jobs = [
        (args.seed, i, args.cycles, exclude, not args.no_shrink)
        for i in range(first, first + count)
    ]
    total, failures = Counters(histories=0), 0
    started = time.monotonic()
    with multiprocessing.Pool(max(1, args.workers)) as pool:
        for counters, lines, saved in pool.imap_unordered(_one, jobs, chunksize=8):
            total.add(counters)
            if lines:
                failures += 1
                print("\n".join(lines), flush=True)
                if args.save:
                    _save(args.save, lines[0], saved)
    _summary(total, failures, time.monotonic() - started, args, exclude)
    return 1 if total.violations else 0


def _save(directory: str, headline: str, text: str) -> None:
    os.makedirs(directory, exist_ok=True)
    name = headline.split()[2].replace("seed=", "seed") + "-" + headline.split()[3]
    with open(os.path.join(directory, f"{name.replace('=', '')}.json"), "w") as out:
        out.write(text)


def _summary(
    c: Counters, failures: int, wall: float, args: argparse.Namespace, exclude: frozenset[str]
) -> None:
    t = c.leftovers
    rows = [
        ("seed", f"{args.seed}" + (f" (without {', '.join(sorted(exclude))})" if exclude else "")),
        ("histories run", f"{c.histories}"),
        ("steps", f"{c.steps} ({c.events} world events, {c.events_applied} applied; "
                  f"{c.cycles} agent cycles)"),
        ("faults injected", f"{c.faults} ({c.cycles_aborted} cycles aborted, {c.crashes} "
                            f"crashes + restarts); brakes {c.brakes}"),
        ("actions taken", f"{c.stops + c.reaps + c.purges} ({c.stops} stops, {c.reaps} reaps, "
                          f"{c.purges} retention purges; "
                          f"{c.skipped} steps skipped on re-verification, {c.failed} failed)"),
        ("operator", f"{c.config_edits} config edits ({c.configs_refused} typo'd configs "
                     f"refused, {c.cycles_not_running} cycles without an agent; "
                     f"{c.identity_refused} cycles refused for identity), "
                     f"{c.dry_runs_beside} dry runs beside the live agent, "
                     f"{c.second_agents_refused} second agents refused, "
                     f"{c.clock_steps} clock steps; {c.restores} restores "
                     f"({c.restores_refused} refused), {c.releases} releases"),
        ("new faults", f"{c.wrong_cloud_cycles} cycles with [nova] on another cloud, "
                       f"{c.unproven_setups} histories without compute_id or a pinned UUID; "
                       f"{c.hostile_disks} hostile disks ({c.hostile_reaps_refused} reaps "
                       f"refused for them); {c.shared_volumes} shared volumes "
                       f"({c.stops_at_once} stops at once); {c.fleet_merges} fleet merges "
                       f"with a forged report ({c.forged_flagged} flagged); "
                       f"{c.api_clock_skewed} histories with Nova's API clock off, "
                       f"{c.configured_dry_runs} configured dry runs"),
        ("leftovers", f"{t.looks} looks told {t.files} stray files, {t.ports} ports, "
                      f"{t.attachments} attachments, {t.allocations} allocations, "
                      f"{t.foreign_ports} foreign ports; {t.commands} commands printed, "
                      f"{t.held} told without one; {t.leaks} left by failed clean-ups, "
                      f"{t.events} leftover events, {t.service_faults} service faults; "
                      f"{t.split_brains} merges told a healthy server split-brain"),
        ("invariant violations", f"{c.violations} (in {failures} histories)"),
        ("wall time", f"{wall:.1f} s ({args.workers} workers)"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name + ':':<{width + 1}} {value}")


if __name__ == "__main__":
    sys.exit(main())
