"""The embedded demo: a simulated Nova and a libvirt test-driver world."""
