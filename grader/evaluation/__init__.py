"""Scoring runs against qrels as `relgrade evaluate` does: reading the files (`files`), and
the records, warnings and notes of one evaluation (`scoring`), shared by the command and the
Python API (`relgrade.evaluate`) so the two cannot drift."""
