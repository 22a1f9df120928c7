"""Decide: for each finding whether a step is due, the cycle's one safety verdict, and every
command the tool tells on the same proofs. Pure; the clock is an argument."""
