"""The LLM judge: requests, reply validation, retries, rate limits and what a server accepts."""
