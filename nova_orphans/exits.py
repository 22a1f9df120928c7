"""Exit codes of every ``nova-orphans`` command, in one place."""

#: Nothing found (foreign or protected guests alone do not count).
OK = 0
#: libvirt or Nova failed, an output could not be written (a full disk, a closed stdout),
#: or, in a fleet audit, a host was not audited or its report not merged.
ERROR = 1
#: Usage or configuration error.
USAGE = 2
#: Findings of kind split-brain, deleted, unknown, misplaced or lost.
FOUND = 3
#: ``run --once``: the agent stopped or reaped something.
ACTED = 4
#: A finding's guest holds a Cinder volume another server is attached to, or that Cinder
#: offers as available (danger shared-volume): worse than any other finding.
SHARED_VOLUME = 5
#: Interrupted by the operator (Ctrl-C, SIGINT): 128 + the signal's number, as a shell says.
INTERRUPTED = 130


def meanings() -> dict[int, str]:
    """What each code means, in the words every sub-command's ``--help`` ends with."""
    return {
        OK: "nothing found (or the command did what was asked)",
        ERROR: "libvirt, Nova or another service failed, an output could not be written, "
        "or a fleet host was not audited (or its report not merged)",
        USAGE: "usage or configuration error (one line names the file, option or argument)",
        FOUND: "orphans found",
        ACTED: "run --once: the agent stopped or reaped something",
        SHARED_VOLUME: "a guest holds a Cinder volume another server uses (danger shared-volume)",
        INTERRUPTED: "interrupted (Ctrl-C)",
    }
