"""The OpenAI Batch API: the client, jobs submitted and collected, their state in the store."""
