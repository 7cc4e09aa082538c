"""Batch files for any inference engine: `relgrade batch export` writes request files and
`relgrade batch import` validates their results as live replies."""
