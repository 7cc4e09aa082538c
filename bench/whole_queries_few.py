"""The relevant share from a few whole queries: bias, coverage and width of the intervals.

m of the Q queries are drawn at random (vectorised over --draws draws); people's grades of every
pair of them are the NIST qrels, the LLM's each of the five shared TREC DL 2019 label sets in
turn (plus the synthetic population of tests/helpers/spotcheck_sim.py). For each m it prints, per
method, the range over the populations of the bias, the coverage of the 95% interval and its
mean width: the table of docs/spot-checks-that-stop.md. The chosen method is
calibration.stats.ppi_clusters (tests/test_ppi_clusters.py runs it draw by draw).

    python bench/whole_queries_few.py [--draws 4000] [--seed 7 | --seeds 1 2 3 4 7]
                                      [--queries 3 6 12]

One seed's 4,000 draws leave a Monte Carlo error of about +-0.002 on each bias; --seeds gives
the range over several.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.stats import t as student_t

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.spotcheck_sim import (  # noqa: E402
    LABEL_SETS,
    load_label_sets,
    synthetic_population,
)

Arr = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


def crossfit(t: dict[str, Arr], mask: Mask, pop: tuple[float, float, int]) -> Arr:
    """The cross-fitted estimate of each draw (rows) over its clusters in `mask`."""
    ftot, var_f, n_pop = pop
    w = mask.astype(np.float64)
    s = {k: (v * w).sum(1, keepdims=True) for k, v in t.items()}
    o = {k: s[k] - t[k] for k in t}  # totals over the other present clusters
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = (o["yf"] / o["n"] - o["y"] * o["f"] / o["n"] ** 2) / var_f
    lam = np.where(o["n"] > 0, np.clip(lam, 0.0, 1.0), 0.0)
    lbar = (lam * w).sum(1) / w.sum(1)
    out: Arr = lbar * ftot / n_pop + ((t["y"] - lam * t["f"]) * w).sum(1) / s["n"][:, 0]
    return out


def jackknife(fn: Callable[[Mask], Arr], shape: tuple[int, int]) -> Arr:
    """The delete-one-cluster jackknife variance of `fn` for each draw."""
    m = shape[1]
    loo = np.stack([fn(np.broadcast_to(np.arange(m) != k, shape)) for k in range(m)], 1)
    out: Arr = (m - 1) / m * ((loo - loo.mean(1, keepdims=True)) ** 2).sum(1)
    return out


def score(est: Arr, var: Arr, q: float, truth: float, logit: bool = False) -> tuple[float, ...]:
    """(bias, coverage, mean width) of est +- q sd, on the logit scale if asked."""
    half = q * np.sqrt(var)
    if logit:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            c, h = np.log(est / (1 - est)), half / (est * (1 - est))
            lo, hi = 1 / (1 + np.exp(h - c)), 1 / (1 + np.exp(-c - h))
        edge = (est <= 0) | (est >= 1) | np.isinf(half)
        lo = np.where(edge, np.maximum(est - half, 0), lo)
        hi = np.where(edge, np.minimum(est + half, 1), hi)
    else:
        lo, hi = np.maximum(est - half, 0), np.minimum(est + half, 1)
    cover = float(np.mean((lo <= truth) & (truth <= hi)))
    return float(est.mean() - truth), cover, float(np.mean(hi - lo))


def methods(
    q: Arr, y: Arr, f: Arr, m: int, draws: int, rng: np.random.Generator
) -> dict[str, tuple[float, ...]]:
    """Each method's (bias, coverage, width) over `draws` draws of m whole queries."""
    qi = q.astype(np.int64)
    per = {
        k: np.bincount(qi, weights=w).astype(np.float64)
        for k, w in (("y", y), ("f", f), ("yf", y * f), ("n", np.ones_like(y)))
    }
    n_q = per["n"].size
    idx = np.argsort(rng.random((draws, n_q)), 1)[:, :m]
    t: dict[str, Arr] = {k: v[idx] for k, v in per.items()}
    pop = (float(f.sum()), float(f.var(ddof=1)), f.size)
    full, shape, fpc, truth = np.ones((draws, m), bool), (draws, m), 1 - m / n_q, float(y.mean())
    est = crossfit(t, full, pop)
    var = fpc * jackknife(lambda mk: crossfit(t, mk, pop), shape)
    share = pop[0] / pop[2]
    big = np.var(per["f"] - share * per["n"], ddof=1)
    with np.errstate(divide="ignore"):
        isaki = np.maximum(1.0, big / np.var(t["f"] - share * t["n"], axis=1, ddof=1))
    hajek = t["y"].sum(1) / t["n"].sum(1)
    v_hajek = fpc * jackknife(lambda mk: (t["y"] * mk).sum(1) / (t["n"] * mk).sum(1), shape)
    ht = n_q / m * t["y"].sum(1) / f.size
    v_ht = fpc * n_q**2 * t["y"].var(1, ddof=1) / m / f.size**2
    tq = float(student_t.ppf(0.975, m - 1))
    return {
        "cross-fitted, Isaki-scaled, logit t (chosen)": score(est, var * isaki, tq, truth, True),
        "cross-fitted, Isaki-scaled, t": score(est, var * isaki, tq, truth),
        "cross-fitted, logit t": score(est, var, tq, truth, True),
        "cross-fitted, t (before)": score(est, var, tq, truth),
        "human-only ratio, jackknife t": score(hajek, v_hajek, tq, truth),
        "human-only Horvitz-Thompson, t": score(ht, v_ht, tq, truth),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        help="several seeds: each cell is the range over the populations and these seeds",
    )
    ap.add_argument("--queries", type=int, nargs="+", default=[3, 6, 12])
    args = ap.parse_args()
    sets = load_label_sets()
    human = (sets.human >= 2).astype(np.float64)
    syn_q, syn_y, syn_f, _ = synthetic_population()
    pops = [(syn_q.astype(np.float64), syn_y, syn_f)]
    q = sets.query.astype(np.float64)
    pops += [(q, human, (sets.llm[n] >= 2).astype(np.float64)) for n in LABEL_SETS]
    print("| queries | method | bias | coverage | mean width |\n| --- | --- | --- | --- | --- |")
    for m in args.queries:
        rows: dict[str, list[tuple[float, ...]]] = {}
        for seed in args.seeds or [args.seed]:
            rng = np.random.default_rng(seed + m)
            for qq, y, f in pops:
                for name, figs in methods(qq, y, f, m, args.draws, rng).items():
                    rows.setdefault(name, []).append(figs)
        for name, per_pop in rows.items():
            a = np.array(per_pop)
            cells = [f"{a[:, 0].min():+.3f} to {a[:, 0].max():+.3f}"]
            cells += [f"{a[:, 1].min():.1%}–{a[:, 1].max():.1%}"]
            cells += [f"{a[:, 2].min():.2f}–{a[:, 2].max():.2f}"]
            print(f"| {m} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
