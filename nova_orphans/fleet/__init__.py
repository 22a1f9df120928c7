"""Audit many compute hosts at once: parallel libvirt scans, one look at Nova, split-brain."""
