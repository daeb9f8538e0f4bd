"""Rendering verdicts for people and machines: the audit's JSON and table (and, later, the
nightly reports)."""
