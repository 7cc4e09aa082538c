"""Judges: what every judge promises the grading pipeline (`base`), ensembles and low-grade
verification (`ensemble`), the LLM judge (`llm/`) and the offline lexical judge (`lexical/`)."""
