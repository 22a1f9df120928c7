"""Exit codes of every ``nova-orphans`` command, in one place."""

#: Nothing found (foreign or protected guests alone do not count).
OK = 0
#: libvirt or Nova failed (or, in a fleet audit, a host could not be reached).
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
