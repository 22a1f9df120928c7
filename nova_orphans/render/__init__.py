"""Rendering: every table and every JSON envelope the commands print."""
