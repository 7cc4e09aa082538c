"""Grading in bulk at the batch price, two ways: `api/` through the OpenAI Batch API (request
files, the client, jobs and their state in the store) and `files/` through batch files for any
inference engine (`batch export` and `batch import`). Both build their requests and check their
replies with what sits here: the judge seen from a batch (`adapter`), its stored configuration
(`job_config`), request lines (`requests`), results lines (`json_lines`) and output checks
(`collect`)."""
