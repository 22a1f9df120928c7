"""Read-only observers of the hypervisor (libvirt) and of Nova's API."""
