"""Grading in bulk at the batch price: `api/` through the OpenAI Batch API, `files/` through
request files for any inference engine (`batch export|import`), `engines/` to run them. All
share the judge seen from a batch (`adapter`), its stored configuration (`job_config`), request
lines (`requests`), results lines (`adapter`) and output checks (`collect`)."""
