"""nova-orphans: find libvirt guests that Nova no longer manages, and handle them safely."""
