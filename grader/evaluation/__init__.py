"""Scoring runs against qrels as `relgrade evaluate` does, one path for the command and the
Python API (`relgrade.evaluate`) so the two cannot drift."""
