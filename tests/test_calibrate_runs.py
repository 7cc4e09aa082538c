"""`relgrade calibrate --run`: the systems' ranking under both label sets (checked against scipy),
per-run estimates when people graded whole queries and why there are none otherwise, and the
report's systems section."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.cli.main import main
from tests.helpers.calibrate_files import calibrate_json, noisy_grades, noisy_runs, write_qrels_rows


def test_runs_give_system_ranking_under_both_label_sets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scipy.stats import kendalltau, spearmanr

    from calibration.stats.systems import tau_ap
    from grader.io.trec import read_qrels, read_run
    from grader.metrics import evaluate, mean_scores

    human, llm = noisy_grades(8, n_queries=15, per_query=20)
    hp = write_qrels_rows(tmp_path / "h.txt", human)
    lp = write_qrels_rows(tmp_path / "l.txt", llm)
    runs = noisy_runs(tmp_path, human, [0.2, 0.8, 1.5, 3.0, 6.0])
    args = ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0"]
    out = calibrate_json(capsys, [*args, *[x for r in runs for x in ("--run", r)], "-m", "P@5"])
    sy = out["systems"]
    assert sy["measure"] == "P(rel=2)@5"
    assert sy["n_systems"] == 5
    h_scores: list[float] = []
    l_scores: list[float] = []
    for r in runs:
        run = read_run(r)
        for qrels, into in ((read_qrels(hp), h_scores), (read_qrels(lp), l_scores)):
            means = mean_scores(evaluate(qrels, run, ["P(rel=2)@5"]))
            into.append(float(means["value"].iloc[0]))
    by_run = {row["run"]: row for row in sy["per_system"]}
    assert [by_run[f"sys{i}"]["human"] for i in range(5)] == pytest.approx(h_scores)
    assert [by_run[f"sys{i}"]["llm"] for i in range(5)] == pytest.approx(l_scores)
    assert sy["kendall_tau"] == pytest.approx(kendalltau(h_scores, l_scores).statistic)
    assert sy["spearman_rho"] == pytest.approx(spearmanr(h_scores, l_scores).statistic)
    assert sy["tau_ap"] == pytest.approx(tau_ap(h_scores, l_scores, [f"sys{i}" for i in range(5)]))
    assert out["bias_by_rank"][0]["bucket"] == "1"
    assert sum(row["n"] for row in out["bias_by_rank"]) == len(human)


def test_whole_queries_graded_give_per_run_estimates_under_the_cluster_design(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ppi_py import ppi_mean_pointestimate

    from grader.io.trec import read_qrels, read_run
    from grader.metrics import evaluate

    human, llm = noisy_grades(9, n_queries=24, per_query=12)
    graded_queries = {f"q{i}" for i in range(10)}
    part = [row for row in human if row[0] in graded_queries]
    hp = write_qrels_rows(tmp_path / "h.txt", part)
    lp = write_qrels_rows(tmp_path / "l.txt", llm)
    runs = noisy_runs(tmp_path, human, [0.5, 2.0])
    args = ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0", "-m", "nDCG@10"]
    out = calibrate_json(capsys, [*args, "--run", runs[0], "--run", runs[1]])
    est = out["estimates"]
    # No manifest: every graded query was graded whole, so the design is inferred as a cluster one
    assert est["design"]["kind"] == "whole-queries" and est["design"]["source"] == "inferred"
    share = est["relevant_share"]
    assert share["labelled_clusters"] == 10
    assert share["interval"] == (
        "jackknife over queries, cross-fitted lambda, Isaki-scaled, logit t, 9 df"
    )
    assert (
        share["estimand"] == "share of relevant pairs (grade >= 2) among these 288 LLM-graded pairs"
    )
    assert set(est["runs"]) == {"sys0", "sys1"}

    def per_query(qrels_path: Path, run: str) -> dict[str, float]:
        long = evaluate(read_qrels(qrels_path), read_run(run), ["nDCG@10"])
        long = long[long["query_id"] != "all"]
        return dict(zip(long["query_id"].astype(str), long["value"], strict=True))

    for name, run in zip(("sys0", "sys1"), runs, strict=True):
        e = est["runs"][name]
        assert set(e) >= {"llm_only", "human_only", "ppi", "ppi_ci", "design", "estimand"}
        assert e["n_labelled"] == 10 and e["n_unlabelled"] == 14
        assert (
            e["interval"] == "t, 9 df"
            and e["estimand"] == "mean nDCG@10 over these 24 queries with LLM grades"
        )
        assert e["ppi_ci"][0] <= e["ppi"] <= e["ppi_ci"][1]
        # PPI++ point estimate, recomputed by ppi_py from independently scored queries
        h, m = per_query(hp, run), per_query(lp, run)
        lab = sorted(graded_queries)
        y = np.array([h[q] for q in lab])
        f = np.array([m[q] for q in lab])
        f_all = np.array(list(m.values()))
        ref = ppi_mean_pointestimate(y, f, f_all, lam=e["lambda"])
        assert e["ppi"] == pytest.approx(float(np.ravel(ref)[0]), abs=1e-12)
        assert e["llm_only"] == pytest.approx(f_all.mean())
    assert est["runs"]["sys0"]["ppi"] > est["runs"]["sys1"]["ppi"]


def test_a_query_graded_in_part_makes_it_a_pair_design_without_run_estimates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(9, n_queries=24, per_query=12)
    part = [row for row in human if int(row[0][1:]) < 10]
    part.append(("q11", "d11_0", human[11 * 12][2]))  # one pair of q11: not a whole query
    args = ["--llm", str(write_qrels_rows(tmp_path / "l.txt", llm)), "--bootstrap", "0"]
    args += ["--human", str(write_qrels_rows(tmp_path / "h.txt", part))]
    out = calibrate_json(capsys, [*args, "--run", noisy_runs(tmp_path, human, [0.5])[0]])
    est = out["estimates"]
    assert est["design"]["kind"] == "pairs" and est["design"]["source"] == "inferred"
    share = est["relevant_share"]
    assert share["clustered_by"] is None and share["interval"] == "normal"
    # Fully graded queries of a pair sample are not a random sample of queries: no run estimate
    [run] = est["runs"].values()
    assert run["ppi"] is None and run["ppi_ci"] is None and run["human_only"] is None
    assert any("pairs drawn uniformly at random" in note for note in out["notes"])


def test_runs_without_any_whole_query_say_why_there_is_no_run_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(10, n_queries=6, per_query=10)
    part = human[::3]  # a third of each query's pairs
    args = ["--llm", str(write_qrels_rows(tmp_path / "l.txt", llm))]
    args += ["--human", str(write_qrels_rows(tmp_path / "h.txt", part)), "--bootstrap", "0"]
    out = calibrate_json(capsys, [*args, "--run", noisy_runs(tmp_path, human, [1.0])[0]])
    assert "relevant_share" in out["estimates"]
    [est] = out["estimates"]["runs"].values()
    # Listed with the LLM-only figure; no human-based number is invented for it.
    assert 0.0 <= est["llm_only"] <= 1.0
    assert est["human_only"] is None and est["ppi"] is None and est["ppi_ci"] is None
    assert est["n_labelled"] == 0 and est["n_unlabelled"] == 6
    assert any("whole query" in note and "whole-queries" in note for note in out["notes"])


@pytest.mark.slow
def test_report_flag_writes_the_html_and_tables_show_systems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(11, n_queries=8, per_query=12)
    report = tmp_path / "out" / "report.html"
    report.parent.mkdir()
    runs = noisy_runs(tmp_path, human, [0.3, 4.0])
    argv = ["calibrate", "--llm", str(write_qrels_rows(tmp_path / "l.txt", llm))]
    argv += ["--human", str(write_qrels_rows(tmp_path / "h.txt", human)), "--bootstrap", "50"]
    argv += ["--run", runs[0], "--run", runs[1], "--report", str(report)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Systems by nDCG@10" in out and "sys0" in out and "sys1" in out
    assert "lowest agreement" in out
    assert f"report written to {report}" in out
    html = report.read_text()
    assert html.count("<svg") == 4  # confusion, distributions, rank bias, systems
    assert 'id="kendall_tau"' in html
