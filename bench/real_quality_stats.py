"""The figures of bench/real_quality.py: agreement through relgrade's own `calibrate`, each
kappa cross-checked with scikit-learn, plus failures, tokens and seconds per judgment."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import cohen_kappa_score

import relgrade as rg
from grader.judges.failures import failure_cause
from grader.models import Judgment

Pair = tuple[str, str]


@dataclass
class Figures:
    label: str
    n: int
    failed: int = 0
    kappa: float = math.nan
    quadratic: float = math.nan
    binary: float = math.nan
    confusion: list[list[int]] = field(default_factory=list)
    grades: list[int] = field(default_factory=list)
    causes: Counter[str] = field(default_factory=Counter)
    prompt_tokens: float = math.nan
    completion_tokens: float = math.nan
    seconds: float = math.nan


def _nested(grades: Mapping[Pair, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (qid, did), grade in grades.items():
        out.setdefault(qid, {})[did] = grade
    return out


def _num(value: object) -> float:
    return math.nan if value is None else float(value)  # type: ignore[arg-type]


def _same(ours: float, theirs: float, what: str, label: str) -> None:
    if math.isnan(ours) and math.isnan(theirs):
        return
    if not math.isclose(ours, theirs, abs_tol=1e-9):
        raise SystemExit(f"{label}: {what} {ours} from relgrade, {theirs} from scikit-learn")


def _sklearn(h: list[int], m: list[int], **kw: object) -> float:
    import warnings

    with warnings.catch_warnings():  # one grade only: nan, as relgrade says
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(h, m, **kw))


def figures(
    label: str, judged: Sequence[Judgment] | Mapping[Pair, int], human: Mapping[Pair, int]
) -> Figures:
    """Agreement of `judged` (judgments, or a label set's grades) with `human` on their pairs."""
    fig = Figures(label, 0)
    if isinstance(judged, Mapping):
        llm = {p: g for p, g in judged.items() if p in human}
    else:
        llm = {(j.query_id, j.doc_id): int(j.grade) for j in judged if j.grade is not None}
        bad = [j for j in judged if j.status != "ok"]
        fig.failed, fig.causes = len(bad), Counter(failure_cause(j.error) for j in bad)
        fig.prompt_tokens = float(np.mean([j.usage.prompt_tokens for j in judged]))
        fig.completion_tokens = float(np.mean([j.usage.completion_tokens for j in judged]))
        fig.seconds = float(np.mean([(j.latency_ms or 0.0) / 1000 for j in judged]))
    if not llm:
        return fig
    result = rg.calibrate(_nested(llm), _nested(human), bootstrap=0).to_dict()
    fig.n = int(result["n"])
    fig.kappa = _num(result["cohen_kappa"])
    fig.quadratic = _num(result["weighted_kappa_quadratic"])
    fig.binary = _num(result["binary_kappa"]["2"])
    fig.confusion = [[int(c) for c in row] for row in result["confusion"]]
    fig.grades = [int(c) for c in result["distributions"]["llm_counts"]]
    pairs = sorted(llm)
    h, m = [human[p] for p in pairs], [llm[p] for p in pairs]
    _same(fig.kappa, _sklearn(h, m), "kappa", label)
    _same(fig.quadratic, _sklearn(h, m, labels=[0, 1, 2, 3], weights="quadratic"), "qwk", label)
    _same(fig.binary, _sklearn([g >= 2 for g in h], [g >= 2 for g in m]), "kappa@2", label)
    return fig


def _row(f: Figures) -> str:
    grades = "/".join(map(str, f.grades)) or "-"
    tokens = (
        f"{f.prompt_tokens:7.0f} {f.completion_tokens:6.1f} {f.seconds:6.2f}"
        if not math.isnan(f.seconds)
        else f"{'-':>7} {'-':>6} {'-':>6}"
    )
    return (
        f"{f.label:<54} {f.n:>4} {f.failed:>4} {f.kappa:7.3f} {f.quadratic:7.3f} "
        f"{f.binary:7.3f} {grades:>13} {tokens}"
    )


def print_figures(results: Sequence[Figures], published: Sequence[Figures]) -> None:
    """The table: one row per model x prompt, then its confusion matrix and failures; then the
    published label sets on the same pairs."""
    head = (
        f"{'model prompt':<54} {'n':>4} {'fail':>4} {'kappa':>7} {'qwk':>7} {'bin>=2':>7} "
        f"{'LLM 0/1/2/3':>13} {'prompt':>7} {'compl':>6} {'s/judg':>6}"
    )
    print(head)
    for f in results:
        print(_row(f))
        print(f"    confusion (rows: human 0-3; columns: LLM 0-3): {f.confusion}")
        causes = ", ".join(f"{cause}: {k}" for cause, k in f.causes.most_common()) or "none"
        print(f"    failures by cause: {causes}")
    print("published DL 2019 label sets on the same pairs:")
    for f in published:
        print(_row(f))
