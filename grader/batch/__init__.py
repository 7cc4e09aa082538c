"""Regrading through the OpenAI Batch API: request files, the API client, jobs and the judge
configuration stored with them, state kept in the store, and collecting output files with the same
validation as live grading."""
