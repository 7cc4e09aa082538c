"""Regrading stored pairs under a new prompt or model: selection, run, diff and metric deltas."""
