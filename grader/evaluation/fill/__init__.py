"""`evaluate --fill`: people's qrels with their holes filled by LLM grades (docs/filling-holes.md).

- `scores`: each run scored three ways, the shares of its top k by source (`evaluate_fill`).
- `interval`: the corrected filled score and its interval (imputations plus pairs graded by both),
  and the corrected difference between two runs, estimated jointly.
- `reach`: whether the pairs graded by both reach where a run's holes are (else no interval).
- `evaluation`: one call from any input form to the records and lines the command prints
  (`--baseline` under `--fill` too).

The metrics core (`grader.metrics`) stays pure IR: these modules use it, never the reverse."""
