"""The defaults of sending requests, defined once: the command line's flags, `Settings`, the
LLM judge, the pipeline and the Batch API's live follow-ups all read them from here."""

from __future__ import annotations

CONCURRENCY = 8
"""Requests in flight at once (`--concurrency`)."""

TIMEOUT_S = 60.0
"""Seconds for one whole request, retries apart (`--timeout`)."""

MAX_ATTEMPTS = 4
"""Attempts per pair before it is recorded failed (`--max-attempts`); the Batch API client's too."""

BATCH_TIMEOUT_S = 120.0
"""Seconds for one Batch API call (upload, create, status, download) without --timeout."""

DEPTH = 10
"""Results graded per query of each run (`--depth`)."""

PROMPT = "passage"
"""The prompt `grade` asks with (`--prompt`)."""

JUDGE = "llm"
"""The judge that grades (`--judge`)."""

MODEL = "gpt-4o-mini"
"""The model where neither --model nor $RELGRADE_MODEL names one."""

OUTPUT_MODE = "json_schema"
"""The output mode a run starts in (`--output-mode`)."""

STORE = "relgrade.db"
"""Where every command keeps (or looks for) judgments, texts and batch jobs."""
