"""One grading run: which pairs, the run's state machine, combined outputs, the dry-run budget."""
