"""One grading run: which pairs, the pipeline and the run's state machine, its progress events,
combined and verified outputs, the dry-run budget."""
