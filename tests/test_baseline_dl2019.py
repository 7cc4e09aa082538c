"""`evaluate --baseline` on TREC DL 2019 (skipped when the shared data is absent): runs ranked by
four LLM label sets over the judged pool, compared with the first through the command's JSON
and through `rg.evaluate`. The randomization p-values are within Monte Carlo error of
`scipy.stats.permutation_test` and (on continuous measures) of ranx's Fisher randomization test
on the same per-query values; the t test equals scipy's `ttest_rel`
and the bootstrap interval `scipy.stats.bootstrap`'s."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ranx.statistical_tests import fisher_randomization_test
from scipy import stats
from statsmodels.stats.multitest import multipletests

import relgrade as rg
from grader.cli.main import main
from tests.helpers import fill_data as fd

pytestmark = [
    pytest.mark.skipif(not fd.DATA.is_dir(), reason="TREC DL 2019 data absent"),
    pytest.mark.slow,
]

MEASURES = ["nDCG@10", "AP(rel=2)", "RR(rel=2)@10", "P(rel=2)@10"]
PERMUTATIONS = 10_000


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each label set's grades plus a little noise, as scores over the judged pool."""
    folder = tmp_path_factory.mktemp("dl2019_baseline")
    rng = np.random.default_rng(34)
    pool = fd.human_qrels()[["query_id", "doc_id"]].reset_index(drop=True)
    sets = {"llama": fd.LLM_SET, **fd.RUN_SETS}
    paths = {}
    for name, label in sets.items():
        grades = pool.merge(fd.label_set(label), on=["query_id", "doc_id"], how="left")["grade"]
        scores = grades.fillna(0).to_numpy(dtype=float) + rng.uniform(0, 0.9, len(pool))
        paths[name] = str(fd.write_run(folder / f"{name}.run", pool.assign(score=scores), name))
    return paths


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["evaluate", "--format", "json", "--per-query", *argv]) == 0
    return list(json.loads(capsys.readouterr().out))


def _paired(records: list[dict[str, Any]], run: str, base: str, measure: str) -> Any:
    def values(name: str) -> dict[str, float]:
        return {
            r["query_id"]: r["value"]
            for r in records
            if r["run"] == name and r["measure"] == measure and r["query_id"] != "all"
        }

    mine, theirs = values(run), values(base)
    return np.array([mine[q] for q in theirs]), np.array(list(theirs.values()))


def _within(ours: float, theirs: float) -> bool:
    """Two Monte Carlo p-values of 10,000 draws each, within 4.5 standard errors."""
    p = max(ours, theirs, 1 / PERMUTATIONS)  # the larger of the two bounds both variances
    error = math.sqrt(2 * p * (1 - p) / PERMUTATIONS)
    return abs(ours - theirs) <= 4.5 * error + 1e-4


def test_randomization_within_monte_carlo_error_of_ranx_and_scipy(
    runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """ranx compares float means with no tolerance, so on a measure with few values (P@10,
    RR@10) it misses most ties with the observed difference and under-states p (0.070 where
    the exact count on the integer scale gives 0.087); there the reference is
    `scipy.stats.permutation_test`, which counts ties within a relative tolerance."""
    qrels = str(fd.DATA / "2019qrels-pass.txt")
    argv = [qrels, *runs.values(), "--baseline", "llama", "--test", "randomization", "-m"]
    records = _json(capsys, [*argv, *MEASURES])
    compared = [r for r in records if r["query_id"] == "all" and r["run"] != "llama"]
    assert len(compared) == 3 * len(MEASURES)
    spread = []
    for r in compared:
        run, base = _paired(records, r["run"], "llama", r["measure"])
        assert len(run) == 43
        scipy_p = stats.permutation_test(
            (run, base),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=PERMUTATIONS,
            rng=np.random.default_rng(1),
        ).pvalue
        assert _within(r["p_value"], scipy_p), (r, scipy_p)
        if r["measure"] in ("nDCG@10", "AP(rel=2)"):  # continuous: no ties for ranx to miss
            ranx_p, _ = fisher_randomization_test(base, run, PERMUTATIONS, 0.05, 42)
            assert _within(r["p_value"], ranx_p), (r, ranx_p)
        spread.append(0.001 < scipy_p < 0.9)
    assert sum(spread) >= 3  # comparisons neither certain nor hopeless: a real check
    holm = multipletests([r["p_value"] for r in compared], method="holm")[1]
    np.testing.assert_allclose([r["p_adjusted"] for r in compared], holm, rtol=1e-12)


def test_t_and_bootstrap_equal_scipy_through_the_api(runs: dict[str, str]) -> None:
    qrels = fd.DATA / "2019qrels-pass.txt"
    plain = rg.evaluate(qrels, runs, MEASURES, per_query=True)
    records: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in plain.to_dict("records")
    ]
    t = rg.evaluate(qrels, runs, MEASURES, baseline="llama")
    boot = rg.evaluate(qrels, runs, MEASURES, baseline=Path(runs["llama"]), test="bootstrap")
    for frame in (t, boot):
        assert list(frame["run"].unique()) == list(runs)
    for (_, tr), (_, br) in zip(t.iterrows(), boot.iterrows(), strict=True):
        if tr["run"] == "llama":
            assert math.isnan(tr["p_value"]) and math.isnan(br["diff_ci_low"])
            continue
        run, base = _paired(records, tr["run"], "llama", tr["measure"])
        ref = stats.ttest_rel(run, base)
        ci = ref.confidence_interval(0.95)
        assert tr["p_value"] == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
        assert (tr["diff_ci_low"], tr["diff_ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
        interval = stats.bootstrap(
            (run - base,),
            np.mean,
            method="percentile",
            n_resamples=PERMUTATIONS,
            rng=np.random.default_rng(0),
        ).confidence_interval
        assert br["diff_ci_low"] == pytest.approx(interval.low, abs=1e-12)
        assert br["diff_ci_high"] == pytest.approx(interval.high, abs=1e-12)
        assert br["diff"] == pytest.approx(tr["diff"], abs=1e-15)
