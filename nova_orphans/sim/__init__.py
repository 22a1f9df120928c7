"""Deterministic, randomized simulation of cloud histories with fault injection.

A history is a seeded sequence of steps: changes to the cloud (servers booted,
deleted while their compute is down, migrated, resized, shelved…) and agent
cycles, some of them with faults (Nova errors, dropped libvirt connections,
races between scan and action, crashes mid-step). The REAL agent, decider and
actuator run over ``SimulatedNova`` and ``SimulatedHost`` on a fake clock, and
the invariants of ``checks`` are verified after every step. Nothing in the
product imports this package.

Run ``python -m nova_orphans.sim --help``.
"""
