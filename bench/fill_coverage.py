"""Coverage of `evaluate --fill`'s interval on TREC DL 2019, per regime of holes and overlap.

Each world removes 40% of the 9,260 human qrels (seeded), refills the removed pairs from the
Llama-3-70B label set (kappa 0.17) and scores the six runs of tests/helpers/fill_data.py; the
full human qrels are the truth. Regimes:

- random: holes drawn at random; 1,000 of the judged pairs also graded by the LLM (uniform,
  `grade --also-judged 1000`).
- top-judged: the holes are every pair some run ranks in its top 10, plus random others up to
  40% (a new system's results are the unjudged ones); 1,000 judged pairs also judged. The
  interval is refused (the overlap does not reach the holes); "unchecked" is the coverage of
  the interval it would print (`check=False`).
- top-sample-N: the same holes; people grade a uniform sample of N holes (`relgrade sample`,
  `annotate`), given with their qrels and the sample's manifest (the holes design).
- random-top10-AP: random holes, but the LLM graded only the holes within the runs' top 10
  (`grade --depth 10`): AP and R@100 look at results nobody graded, and are refused.
- random-diff, top-sample-300-diff: each run's corrected difference from bm25 (the two runs
  estimated jointly, `evaluate_fill(baseline=...)`) against the all-human difference, and how
  often its conclusion (the interval excludes 0) differs from a plain paired t-test on the
  filled per-query scores (p < 0.05).

Per regime and measure: how often the interval covers the full-qrels score (min over runs and
pooled), the share refused, and the median width over the needed width (2 z RMSE of the
corrected score around the truth, over the worlds): 1 is an interval exactly as wide as its
estimate's error needs.

    python bench/fill_coverage.py [--worlds 20] [--regime NAME ...] [--label-set NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scipy.stats import ttest_rel  # noqa: E402

from calibration.spotcheck.also_judged import draw_also_judged  # noqa: E402
from grader.evaluation.fill.scores import Design, FillResult, evaluate_fill  # noqa: E402
from grader.metrics.evaluate import evaluate  # noqa: E402
from tests.helpers import fill_data as fd  # noqa: E402

MEASURES = ["nDCG@10", "P(rel=2)@10"]
BASELINE = "bm25"  # the -diff regimes: each other run's difference from it
DEEP = ["AP(rel=2)", "R(rel=2)@100"]
World = tuple[pd.DataFrame, pd.DataFrame, dict[tuple[str, str], float], Design]


def _key(frame: pd.DataFrame) -> pd.Series:
    return frame["query_id"] + " " + frame["doc_id"]


def top_of_runs(runs: dict[str, pd.DataFrame], k: int) -> set[str]:
    """Keys of the pairs some run ranks in its top k."""
    out: set[str] = set()
    for run in runs.values():
        ranked = run.sort_values(["query_id", "score"], ascending=[True, False])
        top = ranked[ranked.groupby("query_id").cumcount() < k]
        out |= set(_key(top))
    return out


def holes(full: pd.DataFrame, seed: int, top: set[str] | None) -> np.ndarray:
    """Which qrels rows are holes: 40% at random, or `top` plus random others up to 40%."""
    rng = np.random.default_rng(seed)
    size = round(0.4 * len(full))
    out = np.zeros(len(full), dtype=bool)
    if top is not None:
        out |= _key(full).isin(top).to_numpy()
    rest = np.flatnonzero(~out)
    out[rng.choice(rest, size=max(size - int(out.sum()), 0), replace=False)] = True
    return out


def also_judged(kept: pd.DataFrame, removed: pd.DataFrame, labels: pd.DataFrame, seed: int,
                llm_keys: set[str]) -> World:  # fmt: skip
    """People's kept qrels, the LLM's grades (of `llm_keys` and 1,000 also-judged), 1/pi."""
    pool = list(zip(kept["query_id"], kept["doc_id"], strict=True))
    grades = dict(zip(pool, kept["grade"].tolist(), strict=True))
    draw = draw_also_judged(pool, grades, n=1000, seed=seed)
    drawn = {f"{p.query_id} {p.doc_id}" for p in draw.pairs}
    weights = {(p.query_id, p.doc_id): 1 / p.inclusion_probability for p in draw.pairs}
    return kept, labels[_key(labels).isin(llm_keys | drawn)], weights, "judged"


def holes_sample(kept: pd.DataFrame, removed: pd.DataFrame, labels: pd.DataFrame, seed: int,
                 n: int) -> World:  # fmt: skip
    """People's qrels plus their grades of n holes drawn uniformly; the LLM's grades of every
    hole; 1/pi = H/n for the drawn holes."""
    rng = np.random.default_rng(seed + 10_000)
    drawn = removed.iloc[np.sort(rng.choice(len(removed), size=n, replace=False))]
    people = pd.concat([kept, drawn], ignore_index=True)
    weights = dict.fromkeys(zip(drawn["query_id"], drawn["doc_id"], strict=True), len(removed) / n)
    return people, labels[_key(labels).isin(set(_key(removed)))], weights, "holes"


def regimes(
    runs: dict[str, pd.DataFrame], label_set: str = fd.LLM_SET
) -> dict[str, tuple[list[str], Callable[[int], World]]]:
    full, labels = fd.human_qrels(), fd.label_set(label_set)
    top10 = top_of_runs(runs, 10)

    def world(seed: int, top: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
        out = holes(full, seed, top10 if top else None)
        return full[~out].reset_index(drop=True), full[out].reset_index(drop=True)

    def random(seed: int) -> World:
        kept, removed = world(seed, False)
        return also_judged(kept, removed, labels, seed, set(_key(removed)))

    def top_judged(seed: int) -> World:
        kept, removed = world(seed, True)
        return also_judged(kept, removed, labels, seed, set(_key(removed)))

    def sample(n: int) -> Callable[[int], World]:
        return lambda seed: holes_sample(*world(seed, True), labels, seed, n)

    def shallow(seed: int) -> World:
        kept, removed = world(seed, False)
        return also_judged(kept, removed, labels, seed, set(_key(removed)) & top10)

    return {
        "random": (MEASURES, random),
        "top-judged": (MEASURES, top_judged),
        "top-sample-100": (MEASURES, sample(100)),
        "top-sample-300": (MEASURES, sample(300)),
        "random-top10-AP": (DEEP, shallow),
        "random-diff": (MEASURES, random),
        "top-sample-300-diff": (MEASURES, sample(300)),
    }


def truth(runs: dict[str, pd.DataFrame], measures: list[str]) -> dict[tuple[str, str], float]:
    full = fd.human_qrels()
    out = {}
    for name, run in runs.items():
        means = evaluate(full, run, measures).groupby("measure", sort=False)["value"].mean()
        out.update({(name, str(m)): float(v) for m, v in means.items()})
    return out


def measure_regime(
    runs: dict[str, pd.DataFrame], measures: list[str], make: Callable[[int], World], worlds: int
) -> pd.DataFrame:
    """One row per world, run and measure: truth, corrected, low, high, refused."""
    true = truth(runs, measures)
    rows = []
    for seed in range(worlds):
        people, llm, weights, design = make(seed)
        result: FillResult = evaluate_fill(
            people, llm, runs, measures, weights=weights, seed=seed, design=design, check=False
        )
        for (run, measure), value in true.items():
            iv = result.intervals[run][measure]
            refused = measure in result.refused.get(run, {})
            rows.append(
                {"run": run, "measure": measure, "truth": value, "corrected": iv.estimate,
                 "low": iv.low, "high": iv.high, "refused": refused}
            )  # fmt: skip
    return pd.DataFrame(rows)


def measure_differences(
    runs: dict[str, pd.DataFrame], measures: list[str], make: Callable[[int], World], worlds: int
) -> pd.DataFrame:
    """One row per world, run and measure: the all-human difference from BASELINE, the
    corrected one with its interval, and the plain paired t-test on the filled scores."""
    true = truth(runs, measures)
    rows = []
    for seed in range(worlds):
        people, llm, weights, design = make(seed)
        result = evaluate_fill(
            people, llm, runs, measures, weights=weights, seed=seed, design=design,
            check=False, baseline=BASELINE,
        )  # fmt: skip
        base = result.scores[BASELINE]["filled"]
        for run, intervals in result.differences.items():
            filled = result.scores[run]["filled"]
            for i, measure in enumerate(measures):
                iv = intervals[measure]
                plain = ttest_rel(filled.values[i], base.values[i]).pvalue
                plain_diff = float(np.mean(filled.values[i] - base.values[i]))
                rows.append(
                    {"run": run, "measure": measure,
                     "truth": true[run, measure] - true[BASELINE, measure],
                     "corrected": iv.estimate, "low": iv.low, "high": iv.high,
                     "plain_p": float(plain), "plain_diff": plain_diff, "refused": False}
                )  # fmt: skip
    return pd.DataFrame(rows)


def conclusions(name: str, frame: pd.DataFrame) -> list[str]:
    """How often the corrected interval (excluding 0 or not) and the plain test (p < 0.05)
    conclude differently, and which one agrees with the sign of the all-human difference."""
    lines = []
    for measure, rows in frame.groupby("measure", sort=False):
        corrected = (rows["low"] > 0) | (rows["high"] < 0)
        plain = rows["plain_p"] < 0.05
        wrong = np.sign(rows["corrected"]) != np.sign(rows["truth"])
        plain_wrong = np.sign(rows["plain_diff"]) != np.sign(rows["truth"])
        lines.append(
            f"{name:16} {measure:13} differs from the plain paired t-test on the filled scores "
            f"in {(corrected != plain).mean():.0%} of comparisons (plain significant "
            f"{plain.mean():.0%}, {(plain & plain_wrong).mean():.0%} with the wrong sign; "
            f"corrected {corrected.mean():.0%}, {(corrected & wrong).mean():.0%} with the wrong "
            "sign)"
        )
    return lines


def summary(name: str, frame: pd.DataFrame) -> list[str]:
    lines = []
    covers = (frame["low"] <= frame["truth"]) & (frame["truth"] <= frame["high"])
    frame = frame.assign(covers=covers)
    for measure, rows in frame.groupby("measure", sort=False):
        per_run = rows.groupby("run", sort=False)
        cover = per_run["covers"].mean()
        rmse = per_run.apply(lambda r: float(np.sqrt(((r["corrected"] - r["truth"]) ** 2).mean())))
        width = per_run.apply(lambda r: float((r["high"] - r["low"]).median()))
        ratio = (width / (2 * 1.96 * rmse)).median()
        refused = rows["refused"].mean()
        given = rows[~rows["refused"]]
        given_cover = f"{given['covers'].mean():.0%}" if len(given) else "-"
        lines.append(
            f"{name:16} {measure:13} refused {refused:4.0%}  covers (given) {given_cover:>4}  "
            f"unchecked {rows['covers'].mean():4.0%} (min run {cover.min():4.0%})  "
            f"half-width {width.median() / 2:.3f}  width/needed {ratio:.2f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=20, help="holed worlds per regime (20)")
    parser.add_argument("--regime", action="append", help="only these regimes (default all)")
    parser.add_argument(
        "--label-set", action="append", help=f"LLM label sets (default {fd.LLM_SET})"
    )
    args = parser.parse_args()
    runs = fd.dl2019_runs()
    print(f"{args.worlds} worlds per regime, six runs (bench/fill_coverage.py)")
    for label_set in args.label_set or [fd.LLM_SET]:
        print(f"label set {label_set}")
        chosen = regimes(runs, label_set)
        for name in args.regime or list(chosen):
            measures, make = chosen[name]
            if name.endswith("-diff"):
                frame = measure_differences(runs, measures, make, args.worlds)
                lines = summary(name, frame) + conclusions(name, frame)
            else:
                lines = summary(name, measure_regime(runs, measures, make, args.worlds))
            for line in lines:
                print(line, flush=True)


if __name__ == "__main__":
    main()
