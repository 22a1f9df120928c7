"""The quarantine: its paths, manifests, entries, files, restore and retention."""
