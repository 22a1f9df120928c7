"""What the agent remembers and tells: the SQLite journal and the Prometheus metrics."""
