"""Regrading stored pairs under a new prompt or model: selection, dry run, run, diff and metric
deltas."""
