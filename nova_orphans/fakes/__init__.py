"""The fakes: a simulated Nova, Placement, Cinder and Neutron, a simulated host, libvirt
test-driver node files and Nova's reference listing, for the demo, the simulation, the tests
and the benchmarks. Never imported by the product."""
