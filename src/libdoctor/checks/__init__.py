"""Checks: pure functions from the model (and a Disk view) to findings."""
