"""Batch files for any inference engine: `batch export` writes request files, `batch import`
validates their results as live replies, `batch close` ends an export whose engine died."""
