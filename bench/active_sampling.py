"""Active against uniform sampling on TREC DL 2019: what each uncertainty signal can buy.

People: the 9,260 NIST grades (relevant at >= 2). Judges:

- the synthetic calibrated logprob judge of tests/helpers/spotcheck_sim.logprob_judge at several
  sharpnesses (the label sets carry no logprobs), and the same judge made overconfident
  (its log-odds times 3, as LLM logprobs often are);
- judges built from the five shared label sets: P(NIST relevant | the label sets' grades),
  cross-fitted over 5 folds of queries (a calibrated judge built from their disagreement), and
  the five label sets as an ensemble or one at a time (distance to the threshold), as
  `relgrade sample --strategy active` weighs them.

Part 1 (`oracle`): for a judge with P(relevant) r, the best design (draw probability
proportional to sqrt(r (1 - r)), the residual's conditional standard deviation, with r as
the prediction) narrows the interval by the factor E[sqrt v] / sqrt(E[v]), v = r (1 - r); with
the uniform floor of 0.5 the best is sqrt(E[v / w]) / sqrt(E[v]). Part 2 (`design`): the
library's active design and fixed-n interval at n = 300 against uniform PPI++ with the same
prediction, and the share of paths whose sequence ever excludes the truth up to n = 1,000.

    python bench/active_sampling.py [--paths 500] [--part oracle design]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.spotcheck.sequential import active_weights  # noqa: E402
from calibration.stats.confseq import boundary, desraj_terms, running, share_sequence  # noqa: E402
from calibration.stats.ppi import ppi_mean  # noqa: E402
from tests.helpers.spotcheck_sim import (  # noqa: E402
    LABEL_SETS,
    LabelSets,
    load_label_sets,
    logprob_judge,
    successive_paths,
)

Arr = npt.NDArray[np.float64]


def crossfit(sets: LabelSets, key: npt.NDArray[np.int64], folds: int = 5) -> Arr:
    """P(NIST relevant | key), each query's pairs from the other folds of queries (smoothed
    towards the folds' share by 2 pseudo-pairs)."""
    y = (sets.human >= 2).astype(np.float64)
    fold = (np.random.default_rng(0).permutation(sets.query.max() + 1) % folds)[sets.query]
    out = np.empty(y.size)
    for k in range(folds):
        train, test = fold != k, fold == k
        prior = y[train].mean()
        cells, inv = np.unique(key[train], return_inverse=True)
        share = (np.bincount(inv, weights=y[train]) + 2 * prior) / (np.bincount(inv) + 2)
        table = dict(zip(cells.tolist(), share.tolist(), strict=True))
        out[test] = [table.get(x, prior) for x in key[test].tolist()]
    return out


def overconfident(r: Arr, factor: float = 3.0) -> Arr:
    """r with its log-odds multiplied by `factor`."""
    odds = np.log(np.clip(r, 1e-12, 1 - 1e-12)) - np.log(np.clip(1 - r, 1e-12, 1 - 1e-12))
    return np.asarray(1 / (1 + np.exp(-factor * odds)), dtype=np.float64)


def judges(sets: LabelSets) -> dict[str, Arr]:
    """P(relevant) of each judge studied."""
    grades = np.stack([sets.llm[name] for name in LABEL_SETS])
    out = {
        f"logprob judge, sharpness {s}": logprob_judge(sets.human, np.random.default_rng(7), s)
        for s in (0.5, 0.3, 0.15)
    }
    out["logprob judge 0.3, overconfident (log-odds x3)"] = overconfident(
        out["logprob judge, sharpness 0.3"]
    )
    out["5 label sets: P(rel given their 5 grades), cross-fitted"] = crossfit(
        sets, (grades * (4 ** np.arange(5))[:, None]).sum(0)
    )
    out["5 label sets: P(rel given the votes), cross-fitted"] = crossfit(sets, (grades >= 2).sum(0))
    for name in LABEL_SETS:
        out[f"{name.removeprefix('dl2019_')}: P(rel given its grade)"] = crossfit(
            sets, sets.llm[name]
        )
    return out


def auc(y: Arr, r: Arr) -> float:
    """The chance a relevant pair gets a higher r than an irrelevant one (ties count half)."""
    order = np.argsort(r, kind="stable")
    ranks = np.empty(r.size)
    ranks[order] = np.arange(1, r.size + 1)
    for value in np.unique(r):  # average ranks over ties
        tied = r == value
        ranks[tied] = ranks[tied].mean()
    pos = y > 0
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


def oracle(sets: LabelSets) -> None:
    """Part 1: the best any design could do with each judge."""
    y = (sets.human >= 2).astype(np.float64)
    print("| judge | AUC | kappa of r >= 0.5 | best design | best with floor 0.5 |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in judges(sets).items():
        if "overconfident" in name:  # its true P(relevant) is the calibrated judge's
            continue
        v = r * (1 - r)
        w = active_weights(v, 0.5)
        best = np.mean(np.sqrt(v)) / np.sqrt(np.mean(v))
        floored = np.sqrt(np.mean(v / w) / np.mean(v))
        f = r >= 0.5
        agree = float(np.mean(f == (y > 0)))
        chance = f.mean() * y.mean() + (1 - f.mean()) * (1 - y.mean())
        kappa = (agree - chance) / (1 - chance)
        print(f"| {name} | {auc(y, r):.3f} | {kappa:.2f} | {best:.3f} | {floored:.3f} |")


def uniform_half_width(y: Arr, f: Arr, n: int, seed: int) -> float:
    """Mean half-width of the uniform PPI++ interval over 100 samples of n pairs."""
    rng = np.random.default_rng(seed)
    widths = []
    for _ in range(100):
        s = np.zeros(y.size, dtype=bool)
        s[rng.choice(y.size, n, replace=False)] = True
        widths.append(ppi_mean(y[s], f[s], f[~s]).width / 2)
    return float(np.mean(widths))


def run_design(y: Arr, f: Arr, w: Arr, paths: int) -> tuple[float, float, float, float]:
    """Fixed-n half-width at 300 (active, uniform PPI++), its coverage, sequence misses."""
    factor = float(np.mean(w) * np.mean(1 / w))
    order, p = successive_paths(w, 1000, paths, np.random.default_rng(8))
    mean, sd = running(desraj_terms(y[order], f[order], p, float(f.sum()), y.size), factor)
    truth = float(y.mean())
    misses = np.any(np.abs(mean - truth) > sd * boundary(np.arange(1, 1001)), axis=1).mean()
    seqs = [
        share_sequence(y[o[:300]], f[o[:300]], q[:300], f, factor)
        for o, q in zip(order, p, strict=True)
    ]
    half = np.array([(s.fixed_ci[1] - s.fixed_ci[0]) / 2 for s in seqs])
    est = np.array([s.fixed_estimate for s in seqs], dtype=np.float64)
    cover = float(np.mean(np.abs(est - truth) <= half))
    return float(half.mean()), uniform_half_width(y, f, 300, 1), cover, float(misses)


def _row(y: Arr, name: str, label: str, floor: float, f: Arr, u: Arr, paths: int) -> None:
    active, uniform, cover, miss = run_design(y, f, active_weights(u, floor), paths)
    print(
        f"| {name} | {label} | {floor} | {active / uniform:.3f} | {active:.4f} / {uniform:.4f} "
        f"| {cover:.1%} | {miss:.1%} |"
    )


def design(sets: LabelSets, paths: int) -> None:
    """Part 2: the library's design and intervals."""
    y = (sets.human >= 2).astype(np.float64)
    print(
        "| judge | prediction | floor | active / uniform at n = 300 | half-widths | "
        "fixed-n coverage | sequence misses |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    all_judges = judges(sets)
    for name in list(all_judges)[:5]:
        r = all_judges[name]
        for floor in (0.5, 0.3):
            _row(y, name, "0/1", floor, (r >= 0.5).astype(np.float64), np.minimum(r, 1 - r), paths)
            _row(y, name, "P(rel)", floor, r, r * (1 - r), paths)
    votes = sets.votes()
    f = (sets.llm[LABEL_SETS[2]] >= 2).astype(np.float64)
    _row(y, "5 label sets as an ensemble", "llama70b", 0.5, f, np.minimum(votes, 1 - votes), paths)
    for name in LABEL_SETS:
        d = np.abs(sets.llm[name] - 1.5)
        f = (sets.llm[name] >= 2).astype(np.float64)
        label = f"{name.removeprefix('dl2019_')} (distance to threshold)"
        _row(y, label, "0/1", 0.5, f, 0.5 / (1 + 2 * (d - 0.5)), paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=500)
    parser.add_argument("--part", nargs="+", default=["oracle", "design"])
    args = parser.parse_args()
    sets = load_label_sets()
    if "oracle" in args.part:
        oracle(sets)
    if "design" in args.part:
        design(sets, args.paths)


if __name__ == "__main__":
    main()
