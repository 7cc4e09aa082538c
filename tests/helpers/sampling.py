"""Synthetic judgments for the sampling, manifest and annotate tests."""

from __future__ import annotations

import numpy as np

from grader.models import Judgment, JudgmentError


def make_judgment(
    qid: str,
    did: str,
    grade: int | None,
    *,
    distribution: list[float] | None = None,
    disagreement: float | None = None,
) -> Judgment:
    """An ok judgment (or a failed one when grade is None) with a fake key."""
    if grade is None:
        return Judgment(
            query_id=qid,
            doc_id=did,
            status="failed",
            judge="test",
            key=f"k-{qid}-{did}",
            error=JudgmentError(type="InvalidReply", message="no grade"),
        )
    return Judgment(
        query_id=qid,
        doc_id=did,
        grade=grade,
        status="ok",
        judge="test",
        key=f"k-{qid}-{did}",
        distribution=distribution,
        disagreement=disagreement,
    )


def population(
    counts: dict[int, int], *, queries: int = 5, seed: int = 0, with_distribution: bool = False
) -> list[Judgment]:
    """Judgments with `counts[g]` pairs of LLM grade g spread over `queries` queries."""
    rng = np.random.default_rng(seed)
    out: list[Judgment] = []
    i = 0
    for grade, count in sorted(counts.items()):
        for _ in range(count):
            dist = None
            if with_distribution:
                conf = float(rng.uniform(0.3, 1.0))
                rest = (1 - conf) / 3
                dist = [conf if g == grade else rest for g in range(4)]
            out.append(make_judgment(f"q{i % queries}", f"d{i}", grade, distribution=dist))
            i += 1
    return out
