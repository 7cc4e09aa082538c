"""Filling the holes of TREC DL 2019 (skipped when the shared data is absent): 40% of the human
qrels removed at random (seeded), one of the shared LLM label sets answering as the "LLM"
through the fake OpenAI server (so the real grade command path runs: SDK, store, outputs).

- the requests sent equal the distinct hole texts; a rerun sends 0;
- the merged qrels equal people's remaining qrels ∪ the LLM's grades of the holes, exactly;
- `evaluate --fill` equals `evaluate` on the merged file and on condensed lists;
- the interval of the filled score covers the full-qrels score for >= 90% of 20 seeds x 12
  runs and measures, >= 15 of 20 for each, and is about +-0.06 wide for nDCG@10.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from calibration.spotcheck.also_judged import draw_also_judged
from grader.cli.main import main
from grader.evaluation.fill.scores import evaluate_fill
from grader.io.docs import read_docs, read_queries
from grader.io.trec import read_qrels, read_run
from grader.metrics.evaluate import evaluate
from grader.prompts import load_prompt, render_messages
from tests.fakeserver import FakeServer
from tests.helpers import fill_data as fd

pytestmark = [
    pytest.mark.skipif(not fd.DATA.is_dir(), reason="TREC DL 2019 data absent"),
    pytest.mark.slow,
]


def _user(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


def _answers(pairs: list[tuple[str, str]], labels: dict[tuple[str, str], int]) -> dict[str, int]:
    """The label set's grade by the user message a pair's request carries (the first pair of
    equal texts decides, as one request answers them all)."""
    queries = read_queries(fd.DATA / "msmarco-test2019-queries.tsv")
    docs = read_docs(fd.DATA / "dl2019_document.jsonl", ids={d for _, d in pairs})
    spec = load_prompt("passage")
    out: dict[str, int] = {}
    for q, d in pairs:
        user = render_messages(spec, queries[q], docs[d])[0][1]["content"]
        out.setdefault(user, labels[q, d])
    return out


def _ids(frame: pd.DataFrame) -> set[tuple[str, str, int]]:
    return set(zip(frame["query_id"], frame["doc_id"], frame["grade"].tolist(), strict=True))


def _holes(runs: list[Path], kept: set[tuple[str, str]], depth: int) -> list[tuple[str, str]]:
    """The pairs of the runs' top `depth` people did not judge, each once, in run order."""
    top: list[tuple[str, str]] = []
    for path in runs:
        frame = read_run(path)
        frame = frame[frame["rank"] <= depth]
        top += list(zip(frame["query_id"], frame["doc_id"], strict=True))
    return list(dict.fromkeys(p for p in top if p not in kept))


def _grade_argv(
    runs: list[Path], human: Path, server: FakeServer, folder: Path, depth: int
) -> list[str]:
    """`grade` of the runs' holes through the fake server, writing llm.qrels and merged.qrels."""
    return [
        "grade",
        "--queries", str(fd.DATA / "msmarco-test2019-queries.tsv"),
        "--docs", str(fd.DATA / "dl2019_document.jsonl"),
        "--run", *map(str, runs),
        "--depth", str(depth),
        "--skip-judged", str(human),
        "--base-url", server.base_url,
        "--store", str(folder / "s.db"),
        "--concurrency", "16",
        "--quiet",
        "--qrels-out", str(folder / "llm.qrels"),
        "--merged-out", str(folder / "merged.qrels"),
        "--out", str(folder / "j.jsonl"),
    ]  # fmt: skip


def _means(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> dict[tuple[str, str, str], float]:
    """`evaluate --format json`'s mean per (run, measure, regime)."""
    capsys.readouterr()
    assert main(argv) == 0
    records = json.loads(capsys.readouterr().out)
    return {
        (r["run"], r["measure"], r.get("regime", "")): r["value"]
        for r in records
        if r["query_id"] == "all" and "source" not in r
    }


@pytest.mark.usefixtures("llm_env")
def test_grade_fills_exactly_the_holes_and_evaluate_fill_agrees(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holed = fd.drop_share(fd.human_qrels(), 0.4, seed=0)
    human = fd.write_qrels(tmp_path / "human.qrels", holed.kept)
    runs = [fd.write_run(tmp_path / f"{n}.txt", r, n) for n, r in fd.dl2019_runs().items()]
    holes = _holes(runs, {(q, d) for q, d, _ in _ids(holed.kept)}, depth=10)
    answers = _answers(holes, {(q, d): g for q, d, g in _ids(fd.label_set())})
    fake_server.grade_fn = lambda body: answers[_user(body)]
    llm, merged = tmp_path / "llm.qrels", tmp_path / "merged.qrels"
    argv = _grade_argv(runs, human, fake_server, tmp_path, depth=10)
    assert main(argv) == 0
    assert fake_server.counts["requests"] == len(answers)  # one per distinct hole text
    err = capsys.readouterr().err
    assert f"holes {len(holes):,} (sent {len(holes):,}, cached 0)" in err
    # Merged = people's ∪ the LLM's grade of each hole (the answer its text got).
    llm_grades = _ids(read_qrels(llm))
    assert {(q, d) for q, d, _ in llm_grades} == set(holes)
    assert _ids(read_qrels(merged, any_grade=True)) == _ids(holed.kept) | llm_grades
    assert main(argv) == 0
    assert fake_server.counts["requests"] == len(answers)  # the rerun sends nothing
    assert f"(sent 0, cached {len(holes):,})" in capsys.readouterr().err
    measures = ["nDCG@10", "P(rel=2)@10"]
    condensed_names = ["nDCG(judged_only=True)@10", "P(rel=2,judged_only=True)@10"]
    common = [*map(str, runs), "--format", "json", "-m"]
    fill = _means(capsys, ["evaluate", str(human), "--fill", str(llm), *common, *measures])
    on_merged = _means(capsys, ["evaluate", str(merged), *common, *measures])
    condensed = _means(capsys, ["evaluate", str(human), *common, *condensed_names])
    for run in (p.stem for p in runs):
        for m, cm in zip(measures, condensed_names, strict=True):
            assert fill[run, m, "filled"] == on_merged[run, m, ""]
            assert fill[run, m, "judged_only"] == condensed[run, cm, ""]


def _coverage(
    measures: list[str], also: int, seeds: int
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], list[float]]]:
    """How many of `seeds` intervals cover the full-qrels score, and their half-widths, per
    (run, measure)."""
    runs = fd.dl2019_runs()
    full, labels = fd.human_qrels(), fd.label_set()
    truth = {
        (name, str(m)): v
        for name, run in runs.items()
        for m, v in evaluate(full, run, measures)
        .groupby("measure", sort=False)["value"]
        .mean()
        .items()
    }
    covered = dict.fromkeys(truth, 0)
    halves: dict[tuple[str, str], list[float]] = {k: [] for k in truth}
    key = labels["query_id"] + " " + labels["doc_id"]
    for seed in range(seeds):
        holed = fd.drop_share(full, 0.4, seed)
        pool = list(zip(holed.kept["query_id"], holed.kept["doc_id"], strict=True))
        grades = dict(zip(pool, holed.kept["grade"].tolist(), strict=True))
        draw = draw_also_judged(pool, grades, n=also, seed=seed)
        drawn = {f"{p.query_id} {p.doc_id}" for p in draw.pairs}
        removed = set(holed.removed["query_id"] + " " + holed.removed["doc_id"])
        llm = labels[key.isin(removed | drawn)]
        weights = {(p.query_id, p.doc_id): 1 / p.inclusion_probability for p in draw.pairs}
        result = evaluate_fill(holed.kept, llm, runs, measures, weights=weights, seed=seed)
        for (name, measure), value in truth.items():
            interval = result.intervals[name][measure]
            covered[name, measure] += interval.low <= value <= interval.high
            halves[name, measure].append((interval.high - interval.low) / 2)
    return covered, halves


def test_filled_interval_covers_the_full_qrels_score() -> None:
    # 95% intervals, 12 runs x measures, 20 seeds each: at least 90% pooled (216 of 240; at
    # 95% coverage fewer has probability below 0.2%), no cell below 15 of 20. The interval is
    # no wider than it needs: each pair's effect counted once (about +-0.06 for nDCG@10 with
    # 1,000 pairs graded by both; Rubin's rules on each imputation gave +-0.08).
    covered, halves = _coverage(["nDCG@10", "P(rel=2)@10"], also=1000, seeds=20)
    assert len(covered) == 12
    assert sum(covered.values()) >= 216, covered
    assert min(covered.values()) >= 15, covered
    ndcg = [h for (_, m), hs in halves.items() if m == "nDCG@10" for h in hs]
    assert float(np.median(ndcg)) < 0.07
