"""`relgrade evaluate ... --baseline NAME` and `rg.evaluate(..., baseline=NAME)`: every other
run against the baseline, through the command's JSON, CSV and table and through the API, checked
against scipy's `ttest_rel` and `bootstrap` and statsmodels' `multipletests` on the per-query
values the same command prints; missing queries in both missing modes; bad baselines exit 2."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError

COLUMNS = ("diff", "p_value", "p_adjusted", "diff_ci_low", "diff_ci_high")
MEASURES = ["nDCG@10", "P(rel=2)@10", "AP(rel=2)", "RR(rel=1)"]


def _write_run(path: Path, scores: dict[str, dict[str, float]]) -> str:
    lines = []
    for qid, docs in scores.items():
        ranked = sorted(docs.items(), key=lambda kv: -kv[1])
        lines += [f"{qid} Q0 {d} {r} {s:.6f} tag\n" for r, (d, s) in enumerate(ranked, 1)]
    path.write_text("".join(lines))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Graded qrels of 30 queries and four runs: a baseline, a better and a worse run, and a
    run that answers 25 of the 30 queries."""
    folder = tmp_path_factory.mktemp("baseline")
    rng = np.random.default_rng(34)
    grades = {
        f"q{i}": {f"d{j}": int(rng.choice([0, 0, 0, 1, 2, 3])) for j in range(20)}
        for i in range(1, 31)
    }
    (folder / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in grades.items() for d, g in docs.items())
    )
    out = {"qrels": str(folder / "qrels.txt")}
    for name, noise, skip in (
        ("base", 1.5, 0),
        ("better", 0.7, 0),
        ("worse", 4.0, 0),
        ("part", 0.9, 5),
    ):
        run = {
            q: {d: g + rng.normal(0, noise) for d, g in docs.items()}
            for i, (q, docs) in enumerate(grades.items())
            if i >= skip
        }
        out[name] = _write_run(folder / f"{name}.txt", run)
    return out


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["evaluate", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _records(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    code, out, err = _cli(capsys, "--format", "json", "--per-query", *argv)
    assert code == 0, err
    return list(json.loads(out))


def _per_query(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    values: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in records:
        if r["query_id"] != "all":
            values[(r["run"], r["measure"])][r["query_id"]] = r["value"]
    return values


def _paired(values: Any, run: str, base: str, measure: str) -> tuple[np.ndarray, np.ndarray]:
    mine, theirs = values[(run, measure)], values[(base, measure)]
    common = [q for q in theirs if q in mine]
    return np.array([mine[q] for q in common]), np.array([theirs[q] for q in common])


def _runs(files: dict[str, str]) -> list[str]:
    return [files["base"], files["better"], files["worse"], files["part"]]


@pytest.mark.parametrize("missing", [[], ["--trec-eval-missing"]])
def test_t_test_and_holm_equal_scipy_and_statsmodels(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], missing: list[str]
) -> None:
    argv = [files["qrels"], *_runs(files), *missing, "--baseline", "base", "-m", *MEASURES]
    records = _records(capsys, *argv)
    values = _per_query(records)
    alls = [r for r in records if r["query_id"] == "all"]
    compared = [r for r in alls if r["run"] != "base"]
    assert len(compared) == 3 * len(MEASURES)
    for r in compared:
        run, base = _paired(values, r["run"], "base", r["measure"])
        ref = stats.ttest_rel(run, base)
        ci = ref.confidence_interval(0.95)
        assert r["diff"] == pytest.approx(float(np.mean(run - base)), abs=1e-12)
        assert r["p_value"] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
        assert r["diff_ci_low"] == pytest.approx(ci.low, abs=1e-9)
        assert r["diff_ci_high"] == pytest.approx(ci.high, abs=1e-9)
    holm = multipletests([r["p_value"] for r in compared], method="holm")[1]
    for r, expected in zip(compared, holm, strict=True):
        assert r["p_adjusted"] == pytest.approx(expected, rel=1e-12)
    for r in alls:
        if r["run"] == "base":
            assert all(r[c] is None for c in COLUMNS)
    assert all(c not in r for r in records if r["query_id"] != "all" for c in COLUMNS)


def test_missing_queries_scored_as_in_the_mean(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """By default a query the run leaves out scores 0, so diff is the difference of the means;
    under --trec-eval-missing only the queries both answer are paired."""
    argv = [files["qrels"], files["base"], files["part"], "--baseline", "base", "-m", "nDCG@10"]
    zero = [r for r in _records(capsys, *argv) if r["query_id"] == "all"]
    means = {r["run"]: r["value"] for r in zero}
    assert zero[1]["diff"] == pytest.approx(means["part"] - means["base"], abs=1e-12)
    skip = _records(capsys, "--trec-eval-missing", *argv)
    values = _per_query(skip)
    run, base = _paired(values, "part", "base", "nDCG@10")
    assert len(run) == 25 and len(values[("base", "nDCG@10")]) == 30
    part = next(r for r in skip if r["run"] == "part" and r["query_id"] == "all")
    assert part["diff"] == pytest.approx(float(np.mean(run - base)), abs=1e-12)


def test_bonferroni_none_and_bootstrap_through_the_command(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--baseline", "base", files["qrels"], *_runs(files), "-m", *MEASURES]
    values = None
    for correction in ("bonferroni", "none"):
        records = _records(capsys, "--correction", correction, *argv)
        compared = [r for r in records if r["query_id"] == "all" and r["run"] != "base"]
        p = [r["p_value"] for r in compared]
        expected = multipletests(p, method="bonferroni")[1] if correction != "none" else p
        np.testing.assert_allclose([r["p_adjusted"] for r in compared], expected, rtol=1e-12)
        values = _per_query(records)
    records = _records(
        capsys, "--test", "bootstrap", "--permutations", "2000", "--seed", "7", *argv
    )
    for r in (r for r in records if r["query_id"] == "all" and r["run"] != "base"):
        run, base = _paired(values, r["run"], "base", r["measure"])
        ref = stats.bootstrap(
            (run - base,),
            np.mean,
            method="percentile",
            n_resamples=2000,
            rng=np.random.default_rng(7),
        )
        assert r["diff_ci_low"] == pytest.approx(ref.confidence_interval.low, abs=1e-12)
        assert r["diff_ci_high"] == pytest.approx(ref.confidence_interval.high, abs=1e-12)


def test_csv_carries_the_columns_on_the_all_rows(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [files["qrels"], files["base"], files["better"], "--per-query", "-m", "nDCG@10"]
    code, out, err = _cli(capsys, "--baseline", "base", "--format", "csv", *argv)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["run", "query_id", "measure", "value", *COLUMNS]
    better = next(r for r in rows if r["run"] == "better" and r["query_id"] == "all")
    base = next(r for r in rows if r["run"] == "base" and r["query_id"] == "all")
    assert float(better["diff"]) > 0 and float(better["p_value"]) < 0.05
    assert all(base[c] == "" for c in COLUMNS)
    assert all(r[c] == "" for r in rows if r["query_id"] != "all" for c in COLUMNS)


def test_table_marks_the_runs_that_differ_and_says_how(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [files["qrels"], *_runs(files), "--baseline", "base", "-m", "nDCG@10"]
    code, out, err = _cli(capsys, *argv)
    assert code == 0, err
    records = [r for r in _records(capsys, *argv) if r["query_id"] == "all"]
    text = " ".join(out.split())
    assert "base (baseline)" in text
    assert "paired t test, two-sided; Holm over 3 comparisons" in text
    assert "p_adjusted < 0.05" in text
    row = next(line for line in out.splitlines() if line.lstrip("│ ").startswith("nDCG@10"))
    for r in records:
        marked = f"{r['value']:.4f} *" in row
        assert marked == (r["run"] != "base" and r["p_adjusted"] < 0.05), (r, row)
    assert any(r["run"] != "base" and r["p_adjusted"] < 0.05 for r in records)


def test_baseline_by_path_and_in_the_api(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [files["qrels"], *_runs(files), "-m", *MEASURES]
    by_name = _records(capsys, "--baseline", "base", *argv)
    by_path = _records(capsys, "--baseline", files["base"], *argv)
    assert by_name == by_path
    frame = rg.evaluate(
        files["qrels"], _runs(files), MEASURES, per_query=True, baseline=files["base"]
    )
    assert list(frame.columns) == ["run", "query_id", "measure", "value", *COLUMNS]
    for record in by_name:
        row = frame[
            (frame["run"] == record["run"])
            & (frame["query_id"] == record["query_id"])
            & (frame["measure"] == record["measure"])
        ].iloc[0]
        for c in COLUMNS:
            expected = record.get(c)
            assert (math.isnan(row[c]) and expected is None) or row[c] == expected


def test_api_tests_and_corrections(files: dict[str, str]) -> None:
    runs = {"b": files["base"], "x": files["better"], "y": files["worse"]}
    plain = rg.evaluate(files["qrels"], runs, ["nDCG@10"], per_query=True)
    for test in ("t", "randomization", "bootstrap"):
        frame = rg.evaluate(
            files["qrels"], runs, ["nDCG@10"], baseline="b", test=test, permutations=500, seed=1
        )
        x = frame[frame["run"] == "x"].iloc[0]
        per = plain[plain["query_id"] != "all"]
        d = per[per["run"] == "x"]["value"].to_numpy() - per[per["run"] == "b"]["value"].to_numpy()
        assert x["diff"] == pytest.approx(d.mean(), abs=1e-12)
        assert x["diff_ci_low"] < x["diff"] < x["diff_ci_high"]
        assert 0 <= x["p_value"] <= x["p_adjusted"] <= 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "nope"], "'nope' is not one of the runs: base, better"),
        (["--test", "t"], "--test goes with --baseline NAME"),
        (["--baseline", "base", "--permutations", "0"], "--permutations must be at least 1"),
    ],
)
def test_bad_baselines_exit_2_naming_the_runs(
    files: dict[str, str], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, out, err = _cli(capsys, files["qrels"], files["base"], files["better"], *extra)
    assert code == 2 and message in err and not out


def test_one_run_exits_2(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, files["qrels"], files["base"], "--baseline", "base")
    assert code == 2 and "give at least two runs (got 1)" in err


def test_api_bad_baselines_are_input_errors(files: dict[str, str]) -> None:
    runs = [files["base"], files["better"]]
    with pytest.raises(InputError, match="baseline='nope' is not one of the runs: base, better"):
        rg.evaluate(files["qrels"], runs, baseline="nope")
    with pytest.raises(InputError, match="at least two runs"):
        rg.evaluate(files["qrels"], files["base"], baseline="base")
    with pytest.raises(InputError, match="test='z' is not a test"):
        rg.evaluate(files["qrels"], runs, baseline="base", test="z")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="correction='fdr'"):
        rg.evaluate(files["qrels"], runs, baseline="base", correction="fdr")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="permutations"):
        rg.evaluate(files["qrels"], runs, baseline="base", permutations=0)


def test_counts_are_compared_by_their_sums(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """NumRelRet's "all" row is a sum: diff and its interval are the sum's, the p-value the
    mean's."""
    argv = [files["qrels"], files["base"], files["part"], "--baseline", "base"]
    records = _records(capsys, *argv, "-m", "NumRelRet(rel=2)", "nDCG@10")
    alls = {(r["run"], r["measure"]): r for r in records if r["query_id"] == "all"}
    part, base = alls[("part", "NumRelRet(rel=2)")], alls[("base", "NumRelRet(rel=2)")]
    assert part["diff"] == pytest.approx(part["value"] - base["value"], abs=1e-9)
    run, baseline = _paired(_per_query(records), "part", "base", "NumRelRet(rel=2)")
    ref = stats.ttest_rel(run, baseline)
    ci = ref.confidence_interval(0.95)
    assert part["p_value"] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
    assert part["diff_ci_low"] == pytest.approx(ci.low * len(run), abs=1e-9)
    assert part["diff_ci_high"] == pytest.approx(ci.high * len(run), abs=1e-9)


def test_judged_at_k_is_neither_tested_nor_counted_in_the_family(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [files["qrels"], files["base"], files["better"], "--baseline", "base"]
    records = _records(capsys, *argv, "-m", "nDCG@10", "Judged@10", "--correction", "bonferroni")
    means = {r["measure"]: r for r in records if r["query_id"] == "all" and r["run"] == "better"}
    assert all(means["Judged@10"][c] is None for c in COLUMNS)
    ndcg = means["nDCG@10"]
    assert ndcg["p_adjusted"] == pytest.approx(min(1.0, ndcg["p_value"]), abs=1e-12)
