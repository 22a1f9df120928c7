"""Classify: every domain and every leftover of one host judged against Nova, the host's
identity proved first, what orphans cost and endanger. Pure."""
