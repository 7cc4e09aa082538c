"""`evaluate --fill`: people's qrels with their holes filled by LLM grades (docs/filling-holes.md,
docs/architecture.md says which module does what)."""
