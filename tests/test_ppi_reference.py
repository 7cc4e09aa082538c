"""PPI++ cross-checked against `ppi_py` (the PPI++ authors' package) on the same data.

- Unweighted pair samples: the finite-population point estimate equals ppi_py's exactly (its
  lambda, tuned for independent unlabelled data, is our slope * N_u / N), and with a small
  sampling fraction the interval width is within 5% of ppi_py's tuned interval. Ours is
  narrower by the finite-population correction sqrt(1 - n/N) (the estimand is the share among
  THESE pairs), exactly so when lambda is fixed.
- Pair samples weighted by 1/pi: width within 5% of ppi_py with w = 1/pi and all pairs as the
  unlabelled set (ppi_py's weighted point estimate then equals ours at the same lambda).
- population="infinite" is ppi_py's model: same estimate and lambda, width to 0.2%.
- Real data: TREC DL 2019 human grades vs one LLM label set, when /work/shared is present.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy import stats

from calibration.stats.ppi import ppi_mean
from grader.cli.main import main
from grader.evaluation.significance import t_quantile
from tests.helpers.fill_data import DATA as SHARED_DL2019

DATA = SHARED_DL2019
LABELS = "dl2019_test_4prompts_llama70b"


def _synthetic(seed: int, size: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(size) < 0.3).astype(float)
    f = np.where(rng.random(size) < 0.75, y, (rng.random(size) < 0.5).astype(float))
    return y, f


def _width(ci: tuple[np.ndarray, np.ndarray]) -> float:
    return float(np.ravel(ci[1])[0] - np.ravel(ci[0])[0])


def _first(x: object) -> float:
    return float(np.ravel(np.asarray(x))[0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_uniform_pairs_match_ppi_py(seed: int) -> None:
    y_all, f_all = _synthetic(seed)
    rng = np.random.default_rng(100 + seed)
    s = np.zeros(y_all.size, dtype=bool)
    s[rng.choice(y_all.size, 400, replace=False)] = True
    y, f, fu = y_all[s], f_all[s], f_all[~s]
    est = ppi_mean(y, f, fu)
    assert est.ppi == pytest.approx(_first(ppi_mean_pointestimate(y, f, fu)), abs=1e-12)
    ref = ppi_mean_ci(y, f, fu, alpha=0.05)
    assert est.width == pytest.approx(_width(ref), rel=0.05)
    # Exactly: ours is ppi_py's rectifier interval (lambda fixed, an unlabelled part that does
    # not vary) times sqrt(1 - n/N) and the n/(n-1) of an unbiased variance.
    fixed = ppi_mean_ci(y, f, np.zeros(fu.size), alpha=0.05, lam=est.lam)
    n, big_n = y.size, y_all.size
    assert est.width == pytest.approx(_width(fixed) * np.sqrt((1 - n / big_n) * n / (n - 1)))


def test_grading_every_pair_leaves_no_sampling_error() -> None:
    y, f = _synthetic(4, size=500)
    est = ppi_mean(y, f, np.zeros(0))
    assert est.ppi == pytest.approx(y.mean())
    assert est.ppi_ci == pytest.approx((y.mean(), y.mean()))


@pytest.mark.parametrize("seed", [5, 6])
def test_weighted_pairs_match_ppi_py_with_w(seed: int) -> None:
    # Relevant-looking pairs drawn 4x as often (as a stratified sample would); weights 1/pi.
    y_all, f_all = _synthetic(seed)
    rng = np.random.default_rng(200 + seed)
    pi = np.where(f_all == 1, 0.04, 0.01)
    s = rng.random(y_all.size) < pi
    w = 1.0 / pi[s]
    est = ppi_mean(y_all[s], f_all[s], f_all[~s], weights=w)
    ref = ppi_mean_ci(y_all[s], f_all[s], f_all, alpha=0.05, w=w)
    assert est.width == pytest.approx(_width(ref), rel=0.05)
    same_lambda = ppi_mean_pointestimate(y_all[s], f_all[s], f_all, lam=est.lam, w=w)
    assert est.ppi == pytest.approx(_first(same_lambda), abs=1e-12)


def test_infinite_population_is_ppi_py_exactly() -> None:
    y, f = _synthetic(7, size=300)
    _, fu = _synthetic(8, size=5000)
    est = ppi_mean(y, f, fu, population="infinite")
    assert est.ppi == pytest.approx(_first(ppi_mean_pointestimate(y, f, fu)), abs=1e-12)
    assert est.width == pytest.approx(_width(ppi_mean_ci(y, f, fu, alpha=0.05)), rel=0.002)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 42, 300])
def test_t_quantile_matches_scipy(df: int) -> None:
    for level in (0.8, 0.95, 0.99):
        assert t_quantile(level, df) == pytest.approx(stats.t.ppf(0.5 + level / 2, df), rel=1e-12)


def test_whole_queries_are_one_clustered_variance_with_a_t_quantile() -> None:
    # By hand: the cluster ratio estimator's variance, (1 - m/Q) and CR2 factors, t with m-1 df.
    rng = np.random.default_rng(9)
    q = np.repeat(np.arange(20), rng.integers(5, 30, 20))
    y = (rng.random(q.size) < 0.3).astype(float)
    f = np.where(rng.random(q.size) < 0.8, y, 1.0)
    s = q < 5
    est = ppi_mean(y[s], f[s], f[~s], groups=q[s], groups_unlabelled=q[~s], quantile="t")
    e = y[s] - est.lam * f[s]
    e_mean = e.mean()
    totals = pd.Series((e - e_mean) / s.sum()).groupby(q[s]).sum()
    share = pd.Series(np.full(s.sum(), 1 / s.sum())).groupby(q[s]).sum()
    variance = (1 - 5 / 20) * float(np.sum(totals**2 / (1 - share)))
    half = stats.t.ppf(0.975, 4) * np.sqrt(variance)
    assert est.ppi == pytest.approx(est.lam * f.mean() + e_mean)
    assert est.ppi_ci == pytest.approx((est.ppi - half, est.ppi + half))
    assert est.df == 4 and est.clusters == 5


# ---- the real data ----------------------------------------------------------------------------


def _dl2019() -> pd.DataFrame:
    def read(path: Path) -> pd.DataFrame:
        cols = ["query_id", "iter", "doc_id", "grade"]
        return pd.read_csv(
            path, sep=r"\s+", header=None, names=cols, dtype={"query_id": str, "doc_id": str}
        )

    human = read(DATA / "2019qrels-pass.txt")
    llm = read(DATA / "llm-labels" / f"{LABELS}.txt")
    return human.merge(llm, on=["query_id", "doc_id"], suffixes=("_h", "_l"))


@pytest.mark.skipif(not DATA.exists(), reason="TREC DL 2019 data absent")
@pytest.mark.slow
def test_dl2019_uniform_and_stratified_samples_against_ppi_py() -> None:
    from calibration.spotcheck.sampling import plan_design, systematic_draw
    from tests.helpers.sampling import make_judgment

    both = _dl2019()
    y_all = (both["grade_h"].to_numpy() >= 2).astype(float)
    f_all = (both["grade_l"].to_numpy() >= 2).astype(float)
    rng = np.random.default_rng(2019)
    for _ in range(5):  # uniform: 300 of 9,260 pairs
        s = np.zeros(y_all.size, dtype=bool)
        s[rng.choice(y_all.size, 300, replace=False)] = True
        est = ppi_mean(y_all[s], f_all[s], f_all[~s])
        ref = ppi_mean_ci(y_all[s], f_all[s], f_all[~s], alpha=0.05)
        assert est.ppi == pytest.approx(
            _first(ppi_mean_pointestimate(y_all[s], f_all[s], f_all[~s]))
        )
        assert est.width == pytest.approx(_width(ref), rel=0.05)
    judgments = [
        make_judgment(q, d, int(g))
        for q, d, g in zip(both["query_id"], both["doc_id"], both["grade_l"], strict=True)
    ]
    design = plan_design(judgments, strategy="stratified", size=300)
    keys = sorted(design.strata)
    stratum = np.array([keys.index(label) for label in design.labels])
    for _ in range(5):  # stratified, equal allocation over the LLM grades
        order = np.concatenate([rng.permutation(np.flatnonzero(stratum == k)) for k in range(4)])
        s = np.zeros(y_all.size, dtype=bool)
        s[systematic_draw(design.pi, order, rng)] = True
        w = 1.0 / design.pi[s]
        est = ppi_mean(y_all[s], f_all[s], f_all[~s], weights=w)
        ref = ppi_mean_ci(y_all[s], f_all[s], f_all, alpha=0.05, w=w)
        assert est.width == pytest.approx(_width(ref), rel=0.05)


@pytest.mark.skipif(not DATA.exists(), reason="TREC DL 2019 data absent")
@pytest.mark.slow
def test_dl2019_calibrate_names_the_design_and_matches_ppi_py(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from calibration.spotcheck.manifest import build_manifest, write_manifest
    from calibration.spotcheck.sampling import draw_sample
    from tests.helpers.sampling import make_judgment

    both = _dl2019()
    judgments = [
        make_judgment(q, d, int(g))
        for q, d, g in zip(both["query_id"], both["doc_id"], both["grade_l"], strict=True)
    ]
    draw = draw_sample(judgments, strategy="stratified", n=400, seed=3)
    write_manifest(tmp_path / "human.manifest.json", build_manifest(draw))
    human_of = {
        (q, d): g for q, d, g in zip(both["query_id"], both["doc_id"], both["grade_h"], strict=True)
    }
    rows = [f"{p.query_id},{p.doc_id},{human_of[(p.query_id, p.doc_id)]}" for p in draw.pairs]
    (tmp_path / "human.csv").write_text("query_id,doc_id,grade\n" + "\n".join(rows) + "\n")
    llm = DATA / "llm-labels" / f"{LABELS}.txt"
    argv = ["calibrate", "--llm", str(llm), "--human", str(tmp_path / "human.csv")]
    assert main([*argv, "--bootstrap", "0", "--format", "json"]) == 0
    est = json.loads(capsys.readouterr().out)["estimates"]
    assert est["design"] == {
        "kind": "pairs",
        "source": "manifest",
        "strategy": "stratified",
        "text": "pairs drawn at random (stratified sample, from the sample manifest)",
    }
    share = est["relevant_share"]
    assert share["estimand"] == (
        "share of relevant pairs (grade >= 2) among these 9260 LLM-graded pairs"
    )
    assert share["clustered_by"] is None and share["weighted"] is True
    pi = {(p.query_id, p.doc_id): p.inclusion_probability for p in draw.pairs}
    keys = list(zip(both["query_id"], both["doc_id"], strict=True))
    s = np.array([k in pi for k in keys])
    w = np.array([1.0 / pi[k] for k, picked in zip(keys, s, strict=True) if picked])
    y_all = (both["grade_h"].to_numpy() >= 2).astype(float)
    f_all = (both["grade_l"].to_numpy() >= 2).astype(float)
    ref = ppi_mean_ci(y_all[s], f_all[s], f_all, alpha=0.05, w=w)
    assert share["ppi_ci"][1] - share["ppi_ci"][0] == pytest.approx(_width(ref), rel=0.05)
    same_lambda = ppi_mean_pointestimate(y_all[s], f_all[s], f_all, lam=share["lambda"], w=w)
    assert share["ppi"] == pytest.approx(_first(same_lambda), abs=1e-9)
    # the table says the same, with the caution next to a wide interval when there is one
    assert main([*argv, "--bootstrap", "0"]) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "Design: pairs drawn at random (stratified sample, from the sample manifest)" in table
