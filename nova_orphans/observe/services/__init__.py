"""Read-only observers of Placement, Cinder and Neutron, through Nova's session."""
