"""`evaluate --fill`: people's qrels with their holes filled by LLM grades (docs/filling-holes.md):
`scores` (three regimes, shares), `interval` (the corrected score, differences), `reach` (when no
interval), `evaluation` (one call for the command and the API). It uses `grader.metrics`."""
