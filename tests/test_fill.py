"""`relgrade evaluate --fill LLM_QRELS HUMAN_QRELS RUN ...`: the three regimes equal `evaluate` on
people's qrels, on condensed lists and on the merged file (and pytrec_eval), the shares of each
run's top k by source, the JSON records, and the interval of the filled score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import pytrec_eval

from grader.cli.main import main
from grader.evaluation.fill.evaluation import evaluate_filled
from grader.evaluation.fill.scores import evaluate_fill
from grader.io.trec import read_run
from tests.helpers.fill_world import MEASURES, fill_world


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    records: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return records


def _means(records: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    return {(r["run"], r["measure"]): r["value"] for r in records if r["query_id"] == "all"}


def test_three_regimes_equal_evaluate_on_their_qrels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = fill_world(tmp_path)
    paths, runs = world["paths"], [str(r) for r in world["runs"]]
    fill = _json(
        capsys,
        [
            "evaluate",
            str(paths["human"]),
            *runs,
            "--fill",
            str(paths["llm"]),
            "--format",
            "json",
            "-m",
            *MEASURES,
        ],
    )
    by_regime: dict[str, dict[tuple[str, str], float]] = {}
    for regime in ("holes_nonrelevant", "judged_only", "filled"):
        by_regime[regime] = _means(
            [r for r in fill if r.get("regime") == regime and "source" not in r]
        )
    plain = _means(
        _json(capsys, ["evaluate", str(paths["human"]), *runs, "--format", "json", "-m", *MEASURES])
    )
    merged = _means(
        _json(
            capsys, ["evaluate", str(paths["merged"]), *runs, "--format", "json", "-m", *MEASURES]
        )
    )
    condensed_names = [
        m.replace("(rel=2)", "(rel=2,judged_only=True)")
        if "rel" in m
        else "nDCG(judged_only=True)@5"
        for m in MEASURES
    ]
    condensed = _json(
        capsys, ["evaluate", str(paths["human"]), *runs, "--format", "json", "-m", *condensed_names]
    )
    assert by_regime["holes_nonrelevant"] == plain
    assert by_regime["filled"] == merged
    for (run, name), value in _means(condensed).items():
        original = MEASURES[condensed_names.index(name)]
        assert by_regime["judged_only"][run, original] == value
    # pytrec_eval on the merged qrels agrees (nDCG@5, P@5 at rel 2 via relevance_level).
    qrels: dict[str, dict[str, int]] = {}
    for (q, d), g in world["merged"].items():
        qrels.setdefault(q, {})[d] = g
    for path in world["runs"]:
        scored: dict[str, dict[str, float]] = {}
        for line in path.read_text().splitlines():
            q, _, d, _, s, _ = line.split()
            scored.setdefault(q, {})[d] = float(s)
        ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "P.5"}, relevance_level=2)
        per_query = ref.evaluate(scored)
        for key, ours in (("ndcg_cut_5", "nDCG@5"), ("P_5", "P(rel=2)@5")):
            expected = sum(v[key] for v in per_query.values()) / len(qrels)
            assert by_regime["filled"][path.stem, ours] == pytest.approx(expected, abs=1e-9)


def test_shares_count_each_runs_top_k_by_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = fill_world(tmp_path)
    paths = world["paths"]
    records = _json(
        capsys,
        [
            "evaluate",
            str(paths["human"]),
            str(world["runs"][0]),
            "--fill",
            str(paths["llm"]),
            "--format",
            "json",
            "-m",
            "P(rel=2)@5",
        ],
    )
    shares = {r["source"]: r["value"] for r in records if r["measure"] == "Share@5"}
    top = pd.read_csv(
        world["runs"][0], sep=" ", header=None, names=["q", "x", "d", "rank", "s", "t"]
    )
    top = top.sort_values(["q", "s", "d"], ascending=[True, False, False]).groupby("q").head(5)
    ids = list(zip(top["q"], top["d"], strict=True))
    human = sum(p in world["human"] for p in ids)
    llm = sum(p in world["llm"] and p not in world["human"] for p in ids)
    assert shares == {
        "human": human / len(ids),
        "llm": llm / len(ids),
        "unjudged": (len(ids) - human - llm) / len(ids),
    }


def test_a_perfect_llm_gives_a_point_interval_at_the_full_score(tmp_path: Path) -> None:
    world = fill_world(tmp_path)
    truth = {**world["human"], **world["llm"]}
    human = pd.DataFrame(
        [(q, d, g) for (q, d), g in world["human"].items()], columns=["query_id", "doc_id", "grade"]
    )
    exact = {p: world["human"].get(p, g) for p, g in world["llm"].items()}  # the LLM agrees
    llm = pd.DataFrame(
        [(q, d, g) for (q, d), g in exact.items()], columns=["query_id", "doc_id", "grade"]
    )
    run = pd.read_csv(
        world["runs"][1],
        sep=" ",
        header=None,
        names=["query_id", "x", "doc_id", "rank", "score", "t"],
    )
    run = run.astype({"query_id": str, "doc_id": str})[["query_id", "doc_id", "score"]]
    result = evaluate_fill(human, llm, {"r": run}, ["nDCG@5", "P(rel=2)@5"])
    assert result.overlap > 0 and truth
    for name, interval in result.intervals["r"].items():
        filled = dict(result.scores["r"]["filled"].means())[name]
        assert interval.estimate == pytest.approx(filled, abs=1e-12)
        assert interval.high - interval.low == pytest.approx(0.0, abs=1e-12)


def test_json_records_keep_the_evaluate_shape_with_a_regime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = fill_world(tmp_path)
    paths = world["paths"]
    records = _json(
        capsys,
        [
            "evaluate",
            str(paths["human"]),
            str(world["runs"][0]),
            "--fill",
            str(paths["llm"]),
            "--format",
            "json",
            "-m",
            "nDCG@5",
            "--per-query",
        ],
    )
    for r in records:
        assert {"run", "query_id", "measure", "value", "regime"} <= set(r)
        assert r["regime"] in ("holes_nonrelevant", "judged_only", "filled")
    filled = [
        r
        for r in records
        if r["regime"] == "filled" and r["query_id"] == "all" and r["measure"] == "nDCG@5"
    ]
    assert (
        len(filled) == 1 and filled[0]["ci_low"] <= filled[0]["corrected"] <= filled[0]["ci_high"]
    )
    assert len([r for r in records if r["regime"] == "judged_only"]) == 8 + 1


def test_llm_grades_of_another_collection_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = fill_world(tmp_path)
    other = tmp_path / "other.qrels"
    other.write_text("x1 0 a 1\nx2 0 b 2\n")
    argv = ["evaluate", str(world["paths"]["human"]), str(world["runs"][0]), "--fill", str(other)]
    assert main(argv) == 2
    assert "share no query id" in capsys.readouterr().err


def _frame(rows: list[tuple[str, str, float]], last: str) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", last])


def test_every_regime_averages_over_people_s_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = fill_world(tmp_path)
    paths = world["paths"]
    # The LLM also graded a query people never judged, which the run answers.
    with paths["llm"].open("a") as fh:
        fh.write("q9 0 d9-0 3\nq9 0 d9-1 2\n")
    run = tmp_path / "run9.txt"
    run.write_text(world["runs"][0].read_text() + "q9 Q0 d9-0 1 9.0 r\nq9 Q0 d9-1 2 8.0 r\n")
    argv = ["evaluate", str(paths["human"]), str(run), "--fill", str(paths["llm"])]
    capsys.readouterr()
    assert main([*argv, "-m", "P(rel=2)@5", "--per-query", "--format", "json"]) == 0
    captured = capsys.readouterr()
    records, err = json.loads(captured.out), captured.err
    queries = {
        regime: {r["query_id"] for r in records if r["regime"] == regime and "source" not in r}
        for regime in ("holes_nonrelevant", "judged_only", "filled")
    }
    people = {q for q, _ in world["human"]} | {"all"}
    assert queries == dict.fromkeys(queries, people)
    assert "every regime averages over the 8 queries of people's qrels" in err
    assert "2 LLM grades on 1 query people did not judge are left out" in err
    # The filled mean is `evaluate` on the merged qrels of those queries.
    merged = _means(_json(capsys, ["evaluate", str(paths["merged"]), str(run), "--format", "json",
                                   "-m", "P(rel=2)@5"]))  # fmt: skip
    filled = [r for r in records if r["regime"] == "filled" and r["query_id"] == "all"]
    assert filled[0]["value"] == merged["run9", "P(rel=2)@5"]


def test_the_interval_of_a_measure_within_0_1_stays_there() -> None:
    # People graded 4 pairs, the LLM every pair the run returns: a wide interval near 1.
    human = _frame([("1", "1", 2), ("1", "007", 0), ("1.0", "1", 1), ("007", "007", 3)], "grade")
    llm = _frame(
        [("1", "1", 3), ("1", "1.0", 3), ("1", "007", 3), ("1.0", "1", 0), ("1.0", "08", 0),
         ("007", "007", 3), ("007", "2", 3)],
        "grade",
    )  # fmt: skip
    run = _frame(
        [("1", "1", 3.0), ("1", "1.0", 2.0), ("1", "007", 1.0), ("1.0", "1", 3.0),
         ("1.0", "08", 2.0), ("007", "007", 5.0), ("007", "2", 4.0)],
        "score",
    )  # fmt: skip
    # 4 pairs graded by both: too few to vouch for the holes (refused by default).
    measures = ["P(rel=1)@3", "NumRet(rel=1)"]
    result = evaluate_fill(human, llm, {"r": run}, measures, check=False, level=0.9999)
    found = result.intervals["r"]["P(rel=1)@3"]
    assert 0.0 <= found.low <= found.estimate <= found.high <= 1.0
    assert found.high == 1.0  # unclipped, it reaches past 1
    counts = result.intervals["r"]["NumRelRet(rel=1)"]  # a count is not held to 0..1
    assert counts.high > 1.0


def test_one_pair_graded_by_both_says_so(tmp_path: Path) -> None:
    world = fill_world(tmp_path)
    human = _frame([(q, d, g) for (q, d), g in world["human"].items()], "grade")
    holes = [(q, d, g) for (q, d), g in world["llm"].items() if (q, d) not in world["human"]]
    (q, d), g = next(iter(world["human"].items()))
    llm = _frame([*holes, (q, d, g)], "grade")
    run = read_run(world["runs"][0])[["query_id", "doc_id", "score"]]
    evaluation = evaluate_filled(human, llm, {"r": run}, ["P(rel=2)@5"], typed=True, llm_name="x")
    notes = "\n".join(evaluation.notes)
    assert "1 pairs graded by both" in notes or "1 pair graded by both" in notes
    assert "no pair people judged" not in notes
    assert "no interval for the filled score: only 1 pair graded by both" in notes
