"""Grades a few pairs against a real OpenAI-compatible endpoint. Opt-in: `pytest -m live`.

Configured by environment variables, skipped when they are absent:
RELGRADE_LIVE_MODEL (required), OPENAI_API_KEY, RELGRADE_LIVE_BASE_URL (for a local server such
as Ollama or vLLM; then the key may be absent).
"""

from __future__ import annotations

import os

import pytest

from grader.cost import PriceTable
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query

pytestmark = pytest.mark.live

MODEL = os.environ.get("RELGRADE_LIVE_MODEL")
BASE_URL = os.environ.get("RELGRADE_LIVE_BASE_URL")
KEY = os.environ.get("OPENAI_API_KEY")

needs_endpoint = pytest.mark.skipif(
    not MODEL or not (KEY or BASE_URL),
    reason="set RELGRADE_LIVE_MODEL and OPENAI_API_KEY (or RELGRADE_LIVE_BASE_URL) to run",
)

PAIRS = [
    (
        Query(query_id="q1", text="what temperature does water boil at sea level"),
        Doc(doc_id="d1", text="At sea level, pure water boils at 100 degrees Celsius (212 F)."),
        3,
    ),
    (
        Query(query_id="q1", text="what temperature does water boil at sea level"),
        Doc(doc_id="d2", text="The 1998 World Cup final was played at the Stade de France."),
        0,
    ),
    (
        Query(query_id="q2", text="read a TREC run file in python"),
        Doc(
            doc_id="trec.py::read_run",
            text="def read_run(path):\n    '''Read a TREC run file into a DataFrame.'''\n",
            metadata={"path": "grader/io/trec.py", "symbol": "read_run", "language": "python"},
        ),
        3,
    ),
]


@needs_endpoint
@pytest.mark.parametrize(("query", "doc", "expected"), PAIRS, ids=["answer", "unrelated", "code"])
async def test_live_endpoint_grades_obvious_pairs(query: Query, doc: Doc, expected: int) -> None:
    assert MODEL is not None
    prompt = "code-v1" if doc.metadata else "passage-v1"
    judge = LLMJudge(
        model=MODEL, prompt=prompt, base_url=BASE_URL, api_key=KEY, prices=PriceTable.from_files()
    )
    try:
        j = await judge.judge(query, doc, key="live")
    finally:
        await judge.aclose()
    assert j.status == "ok", j.error
    assert j.grade is not None and abs(j.grade - expected) <= 1
    assert j.usage.prompt_tokens > 0 and j.usage.completion_tokens > 0
    assert KEY is None or KEY not in j.model_dump_json()
