"""The operator of a history: the config file the agent starts from, and the typos in it.

Every agent start in a history (the first one, a restart after the operator edits
the config, a restart after a crash) renders the ``Setup`` and the operator's
current edits as a real INI file and loads it with the product's own strict loader
(``nova_orphans.config.load``, docs/design.md rule 11); the agent's host, libvirt URI,
policy and deny list come from what it loaded. A typo'd file must be refused, and a
file that loads must give the agent exactly the setup's policy.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

from nova_orphans import config
from nova_orphans.config import ConfigError
from nova_orphans.decide.policy import Policy
from nova_orphans.model import Selector
from nova_orphans.record.journal import Journal, JournalLocked, refuse_if_held
from nova_orphans.record.lock import LiveAgentRunning, LiveLock
from nova_orphans.sim.cloud import HOST, OTHER
from nova_orphans.sim.steps import Setup

#: The other cloud a wrong ``[nova]`` section reaches (``Config.cloud``).
OTHER_CLOUD = "other-cloud"
#: The libvirt URI of each simulated host's libvirt (``sim://`` is the simulation's scheme).
URIS = {HOST: f"sim://{HOST}", OTHER: f"sim://{OTHER}"}

#: The typos an operator makes: (section, key, value) written instead of, or besides, the
#: right line. Each must be refused by the loader.
TYPOS: dict[str, tuple[str, str, str]] = {
    "dryrun": ("agent", "dryrun", "true"),
    "action-destroy": ("agent", "action_deleted", "destroy"),
    "intervl": ("agent", "intervl", "300"),
    "interval-5": ("agent", "interval", "5"),
    "grace-words": ("agent", "grace_period", "one hour"),
    "sightings-zero": ("agent", "sightings_required", "0"),
    "fraction-2": ("agent", "max_orphan_fraction", "2"),
    "hots": ("DEFAULT", "hots", OTHER),
    "libvirt-uri": ("libvirt", "uri", URIS[OTHER]),
    "section": ("agnet", "action_deleted", "stop"),
}


@dataclasses.dataclass(frozen=True)
class Config:
    """The operator's current config edits: which host and libvirt it names, and a typo."""

    host: str = HOST
    libvirt: str = HOST
    typo: str | None = None
    #: Whose Nova the ``[nova]`` section reaches: this cloud's, or another cloud's
    #: (``OTHER_CLOUD``: staging credentials, a wrong region) with a same-named compute.
    cloud: str = ""

    @property
    def wrong_view(self) -> bool:
        """True when the config names another host, another host's libvirt or another cloud."""
        return self.host != HOST or self.libvirt != HOST or self.wrong_cloud

    @property
    def wrong_cloud(self) -> bool:
        """True when the ``[nova]`` section reaches another cloud's Nova."""
        return self.cloud == OTHER_CLOUD

    def edited(self, change: str) -> Config:
        """The config after the operator's edit ``change`` (an ``Event.arg`` of op "config").

        "host:H" / "libvirt:H": name host H, or read H's libvirt (one wrong line at a
        time); "cloud:C": reach cloud C's Nova; "typo:T": add typo T to the file as it
        is; "right": the correct config again.
        """
        what, _, value = change.partition(":")
        if what == "host":
            return Config(host=value)
        if what == "libvirt":
            return Config(libvirt=value)
        if what == "cloud":
            return Config(cloud=value)
        if what == "typo":
            return dataclasses.replace(self, typo=value)
        return Config()


@dataclasses.dataclass(frozen=True)
class Loaded:
    """What the agent started with, as the product's loader read it."""

    host: str
    libvirt_uri: str
    policy: Policy
    deny: Selector
    #: The live journal and the dry runs' own (``conf.state_paths``).
    journal: str
    dry_run_journal: str
    #: ``[agent] dry_run`` and ``[DEFAULT] compute_node_uuid`` as loaded.
    dry_run: bool = False
    pinned_node: str | None = None
    #: ``[DEFAULT] instances_path`` and ``[leftovers] host_instances_path`` as loaded.
    instances_path: str = ""
    host_instances_path: str | None = None


def instances_dir(state_dir: str) -> str:
    """The host's ``instances_path`` in a history's scratch directory (``sim.leftovers``)."""
    return os.path.join(state_dir, "instances")


def render(setup: Setup, edits: Config, state_dir: str, node_uuid: str = "") -> str:
    """The INI text of the agent's config file for ``setup`` with the operator's ``edits``.

    ``node_uuid``: Nova's node of the host, pinned when ``setup.pin_node``.
    """
    actions = dict(setup.actions)
    instances = instances_dir(state_dir)
    sections: dict[str, list[tuple[str, str]]] = {
        "DEFAULT": [("host", edits.host), ("instances_path", instances)],
        "agent": [
            ("interval", f"{int(setup.interval)}"),
            ("grace_period", f"{int(setup.grace_period)}"),
            ("sightings_required", f"{setup.sightings_required}"),
            ("reap_delay", f"{int(setup.reap_delay)}"),
            ("max_actions_per_cycle", f"{setup.max_actions_per_cycle}"),
            ("max_orphan_fraction", f"{setup.max_orphan_fraction}"),
            ("brake_min_orphans", f"{setup.brake_min_orphans}"),
            ("state_dir", state_dir),
        ],
        "libvirt": [("connection_uri", URIS[edits.libvirt])],
        # NOTE: the host's own path, so that no container around the run withholds rm -r.
        "leftovers": [("host_instances_path", instances)],
    }
    # NOTE: the operator asks for the impossible (reap a foreign guest...) only in the
    # simulation's own Setup; the config has no such option, so those stay out.
    for kind in ("deleted", "unknown", "misplaced"):
        if kind in actions:
            sections["agent"].append((f"action_{kind}", actions[kind]))
    if setup.pin_node:
        sections["DEFAULT"].append(("compute_node_uuid", node_uuid))
    if setup.stop_shared_volume_at_once:
        sections["agent"].append(("stop_shared_volume_at_once", "true"))
    if setup.dry_run:
        sections["agent"].append(("dry_run", "true"))
    if setup.allow_patterns:
        sections["agent"].append(("allow_name_patterns", ",".join(setup.allow_patterns)))
    if setup.deny_patterns:
        sections["DEFAULT"].append(("deny_name_patterns", ",".join(setup.deny_patterns)))
    if setup.deny_labels:
        sections["DEFAULT"].append(("deny_uuids", ",".join(sorted(setup.deny().uuids))))
    if setup.leftover_sightings_required is not None:
        sections["leftovers"].append(("sightings_required", f"{setup.leftover_sightings_required}"))
    if setup.leftover_grace_period is not None:
        sections["leftovers"].append(("grace_period", f"{int(setup.leftover_grace_period)}"))
    if edits.typo is not None:
        section, key, value = TYPOS[edits.typo]
        lines = sections.setdefault(section, [])
        lines[:] = [(k, v) for k, v in lines if k != key] + [(key, value)]
    return "".join(
        f"[{section}]\n" + "".join(f"{key} = {value}\n" for key, value in lines) + "\n"
        for section, lines in sections.items()
    )


def load(setup: Setup, edits: Config, workdir: str, node_uuid: str = "") -> Loaded:
    """Write the config file and load it with the product's loader; raises ``ConfigError``.

    NOTE: the ``[nova]`` section is not rendered: the simulation hands the agent the
    Nova its ``edits.cloud`` names (a wrong cloud needs no other line to be wrong).
    """
    path = os.path.join(workdir, "nova-orphans.conf")
    with open(path, "w", encoding="utf-8") as out:
        out.write(render(setup, edits, workdir, node_uuid))
    conf = config.load([path])
    settings = config.host_settings(conf)
    paths = config.state_paths(conf)
    return Loaded(
        settings.host,
        settings.libvirt_uri,
        config.policy(conf),
        settings.deny,
        paths.journal,
        paths.dry_run_journal,
        bool(conf.agent.dry_run),
        settings.pinned_node,
        settings.instances_path,
        settings.host_instances_path,
    )


def nova_state(node_uuid: str, scratch: str | None) -> str:
    """A nova-compute state_path whose compute_id holds ``node_uuid``, shared by every run.

    NOTE: one path for every run (the node UUID is the same in each), so that a dry run
    and the live run of one history report the same identity line (invariant 5); it is
    written once, through a rename, so a concurrent run never reads half of it.
    """
    directory = os.path.join(scratch or tempfile.gettempdir(), f"nova-orphans-sim-{node_uuid}")
    if not os.path.exists(os.path.join(directory, "compute_id")):
        os.makedirs(directory, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(node_uuid)
        os.replace(partial, os.path.join(directory, "compute_id"))
    return directory


def second_agent(journal_path: str, live_lock: str, workdir: str) -> tuple[bool, list[str]]:
    """A second ``nova-orphans run`` on the live agent's state: whether both of its ways
    in were refused, and what was not (invariant 10)."""
    problems = []
    try:
        refuse_if_held(journal_path)
        problems.append("refuse_if_held did not name the live agent")
    except JournalLocked:
        pass
    refused = 0
    try:
        Journal(journal_path, exclusive=True).close()
        problems.append("a second live agent opened the journal the live agent holds")
    except JournalLocked:
        refused += 1
    # NOTE: a second agent with a state directory of its own (a unit beside a
    # container) shares no journal: this host's live lock must refuse it (rule 14).
    try:
        LiveLock.take(live_lock, f"{workdir}/other-state/journal.sqlite").release()
        problems.append("a second live agent of another state directory took the live lock")
    except LiveAgentRunning:
        refused += 1
    return refused == 2, problems


def host_of(uri: str) -> str:
    """The simulated host whose libvirt ``uri`` names."""
    return next(host for host, known in URIS.items() if known == uri)


__all__ = [
    "OTHER_CLOUD",
    "TYPOS",
    "URIS",
    "Config",
    "ConfigError",
    "Loaded",
    "host_of",
    "instances_dir",
    "load",
    "nova_state",
    "render",
    "second_agent",
]
