"""Read-only observers of Nova's API: one host, its changes, its compute nodes, the fleet."""
