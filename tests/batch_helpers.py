"""Shared set-up for the batch and regrade tests: a store holding an old version of judgments
(with texts), a new prompt file, and a live judge for the fake server."""

from __future__ import annotations

from pathlib import Path

from grader.cost import ModelPrice, PriceTable
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RetryPolicy
from grader.keys import content_key
from grader.models import Doc, Judgment, JudgmentError, PromptRef, Query
from grader.prompts import PromptSpec, load_prompt
from grader.store.store import Store
from grader.store.writing import text_rows

OLD_REF = PromptRef(name="passage", version="1", sha256="0" * 64)
PRICES = PriceTable(
    models={"fake-model": ModelPrice(input=1.0, cached_input=0.5, output=2.0)},
    batch_discount=0.5,
)
OLD_FINGERPRINT = {"judge": "openai:old-model", "prompt_sha": OLD_REF.sha256}


def new_prompt(tmp_path: Path, version: str = "2") -> PromptSpec:
    """A copy of the shipped passage prompt with a changed instruction and version."""
    source = load_prompt("passage-v1").source
    text = Path(source).read_text(encoding="utf-8")
    text = text.replace('version = "1"', f'version = "{version}"').replace(
        "Grade how relevant the passage is to the query.",
        "Grade how relevant the passage is to the query. Be strict about partial answers.",
    )
    path = tmp_path / f"passage-v{version}.toml"
    path.write_text(text, encoding="utf-8")
    return load_prompt(path)


def seed_store(path: Path, n: int = 6, *, failed: tuple[int, ...] = ()) -> list[Judgment]:
    """A store with `n` old judgments (grades 0,1,2,3,0,1,...); indices in `failed` failed."""
    olds: list[Judgment] = []
    with Store(path) as store:
        for i in range(n):
            q = Query(query_id=f"q{i // 3}", text=f"what is topic {i // 3}")
            d = Doc(doc_id=f"d{i}", text=f"passage number {i} about topic {i // 3}", title="T")
            key = content_key(OLD_FINGERPRINT, q.text, d.text)
            if i in failed:
                j = Judgment(
                    query_id=q.query_id,
                    doc_id=d.doc_id,
                    status="failed",
                    judge="openai:old-model",
                    prompt=OLD_REF,
                    key=key,
                    error=JudgmentError(type="InvalidReply", message="x"),
                )
            else:
                j = Judgment(
                    query_id=q.query_id,
                    doc_id=d.doc_id,
                    grade=i % 4,
                    status="ok",
                    reason=f"old reason {i}",
                    judge="openai:old-model",
                    prompt=OLD_REF,
                    key=key,
                    cost=0.001,
                )
            store.put_many([(j, OLD_FINGERPRINT)])
            store.put_text_rows(*text_rows([q], [d]))
            olds.append(j)
    return olds


def live_judge(base_url: str, prompt: PromptSpec, model: str = "fake-model") -> LLMJudge:
    """The real LLM judge against the fake server, with a price and near-instant retries."""
    return LLMJudge(
        model=model,
        prompt=prompt,
        base_url=base_url,
        api_key="sk-test",
        policy=RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01),
        prices=PRICES,
    )
