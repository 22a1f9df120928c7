"""State paths: where the agent keeps its journal and its quarantine (``[agent]`` state_dir)."""

from __future__ import annotations

import dataclasses
import os

from oslo_config import cfg


@dataclasses.dataclass(frozen=True)
class StatePaths:
    """Where the agent keeps its journal and its quarantine."""

    journal: str
    quarantine: str
    #: A dry run's own journal, so that it never advances the live agent's sightings,
    #: grace or caps (docs/design.md rule 14); ``history`` shows both.
    dry_run_journal: str


def state_paths(conf: cfg.ConfigOpts) -> StatePaths:
    """The journal and quarantine paths, defaulting under ``state_dir``."""
    agent = conf.agent
    journal = agent.journal_path or os.path.join(agent.state_dir, "journal.sqlite")
    return StatePaths(
        journal=journal,
        quarantine=agent.quarantine_dir or os.path.join(agent.state_dir, "quarantine"),
        dry_run_journal=f"{journal}.dry-run",
    )
