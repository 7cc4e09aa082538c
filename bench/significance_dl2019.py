"""`evaluate --baseline` on TREC DL 2019: the worked example of docs/significance.md.

Four runs over the judged pool, each ranked by one LLM label set plus a little noise (DL 2019
ships no system runs; tests/helpers/fill_data.py), are compared with the first ("llama") on three
measures by each test. Then:

- ties: on P(rel=2)@10, whose per-query values are tenths, the randomization p-value against
  ranx's (float means compared without a tolerance), scipy's `permutation_test` and a count on
  the integer scale (tenths), where a tie is a tie;
- size under the null: each trial gives every query's two scores (run, baseline) to one side or
  the other at random, which makes the two runs exchangeable; the share of the trials in which
  each test calls a comparison significant at 0.05 (9 comparisons: 3 runs x 3 measures), and
  the share in which any of the 9 is called significant, with Holm, Bonferroni and without.

    python bench/significance_dl2019.py [--trials 300] [--permutations 10000]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import relgrade as rg  # noqa: E402
from grader.evaluation.significance import (  # noqa: E402
    Correction,
    Test,
    adjust,
    paired_differences,
)
from tests.helpers import fill_data as fd  # noqa: E402

MEASURES = ["nDCG@10", "AP(rel=2)", "P(rel=2)@10"]
CORRECTIONS: tuple[Correction, ...] = ("none", "bonferroni", "holm")
BASE = "llama"


def runs() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(34)
    pool = fd.human_qrels()[["query_id", "doc_id"]].reset_index(drop=True)
    out = {}
    for name, label in {BASE: fd.LLM_SET, **fd.RUN_SETS}.items():
        grades = pool.merge(fd.label_set(label), on=["query_id", "doc_id"], how="left")["grade"]
        scores = grades.fillna(0).to_numpy(dtype=float) + rng.uniform(0, 0.9, len(pool))
        out[name] = pool.assign(score=scores)
    return out


def example(qrels: Path, ranked: dict[str, pd.DataFrame], permutations: int) -> None:
    print("## compared with", BASE, "(43 queries)\n")
    print("| run | measure | value | diff | test | p_value | p_adjusted (Holm) | 95% CI |")
    print("|---|---|---|---|---|---|---|---|")
    for test in ("t", "randomization", "bootstrap"):
        frame = rg.evaluate(
            qrels, ranked, MEASURES, baseline=BASE, test=test, permutations=permutations
        )
        for row in frame[frame["run"] != BASE].itertuples():
            print(
                f"| {row.run} | {row.measure} | {row.value:.4f} | {row.diff:+.4f} | {test} | "
                f"{_p(row.p_value)} | {_p(row.p_adjusted)} | "
                f"[{row.diff_ci_low:+.4f}, {row.diff_ci_high:+.4f}] |"
            )
    print()


def _p(value: Any) -> str:
    return f"{value:.4f}" if value >= 1e-4 else "<0.0001"


def per_query(qrels: Path, ranked: dict[str, pd.DataFrame]) -> dict[tuple[str, str], np.ndarray]:
    frame = rg.evaluate(qrels, ranked, MEASURES, per_query=True)
    frame = frame[frame["query_id"] != "all"]
    return {
        (str(run), str(m)): group["value"].to_numpy()
        for (run, m), group in frame.groupby(["run", "measure"], sort=False)
    }


def ties(values: dict[tuple[str, str], np.ndarray], permutations: int) -> None:
    from ranx.statistical_tests import fisher_randomization_test
    from scipy import stats

    print("## ties: P(rel=2)@10, randomization p-values\n")
    print("| run | relgrade | integer scale (1,000,000 flips) | scipy permutation_test | ranx |")
    print("|---|---|---|---|---|")
    base = values[(BASE, "P(rel=2)@10")]
    rng = np.random.default_rng(1)
    for run in ("flant5", "sun", "order3210"):
        mine = values[(run, "P(rel=2)@10")]
        ours = paired_differences(mine - base, "randomization", permutations=permutations).p_value
        tenths = np.round((mine - base) * 10).astype(np.int64)
        reached = 0
        for _ in range(100):
            signs = 1 - 2 * rng.integers(0, 2, (10_000, tenths.size))
            reached += int(np.count_nonzero(np.abs(signs @ tenths) >= abs(tenths.sum())))
        scipy_p = stats.permutation_test(
            (mine, base),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=permutations,
            rng=np.random.default_rng(2),
        ).pvalue
        ranx_p, _ = fisher_randomization_test(base, mine, permutations, 0.05, 42)
        cells = [ours, reached / 1_000_000, scipy_p, ranx_p]
        print(f"| {run} | " + " | ".join(_p(c) for c in cells) + " |")
    print()


def null_size(values: dict[tuple[str, str], np.ndarray], trials: int, permutations: int) -> None:
    """Rejections at 0.05 when each query's pair of scores is given to either side at random."""
    rng = np.random.default_rng(7)
    pairs = [(r, m) for r in ("flant5", "sun", "order3210") for m in MEASURES]
    tests: tuple[Test, ...] = ("t", "randomization", "bootstrap")
    single = dict.fromkeys(tests, 0)
    family = {(t, c): 0 for t in tests for c in ("none", "bonferroni", "holm")}
    started = time.perf_counter()
    for trial in range(trials):
        swap = rng.integers(0, 2, len(values[(BASE, MEASURES[0])])).astype(bool)
        for test in tests:
            p = []
            for run, measure in pairs:
                mine, base = values[(run, measure)], values[(BASE, measure)]
                a, b = np.where(swap, base, mine), np.where(swap, mine, base)
                result = paired_differences(a - b, test, permutations=permutations, seed=trial)
                p.append(result.p_value)
            single[test] += sum(x < 0.05 for x in p)
            for correction in CORRECTIONS:
                adjusted = adjust(p, correction)
                family[(test, correction)] += bool(np.nanmin(adjusted) < 0.05)
    seconds = time.perf_counter() - started
    queries = len(values[(BASE, MEASURES[0])])
    print(f"## under the null: {trials} trials x {len(pairs)} comparisons, {queries} queries\n")
    print("| test | one comparison significant | any of 9, no correction | Bonferroni | Holm |")
    print("|---|---|---|---|---|")
    for test in tests:
        share = single[test] / (trials * len(pairs))
        err = math.sqrt(0.05 * 0.95 / (trials * len(pairs)))
        fw = [family[(test, c)] / trials for c in ("none", "bonferroni", "holm")]
        print(
            f"| {test} | {share:.3f} (+-{2 * err:.3f}) | {fw[0]:.3f} | {fw[1]:.3f} | {fw[2]:.3f} |"
        )
    print(f"\n({seconds:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--permutations", type=int, default=10_000)
    args = parser.parse_args()
    if not fd.DATA.is_dir():
        sys.exit(f"TREC DL 2019 is not at {fd.DATA}")
    qrels = fd.DATA / "2019qrels-pass.txt"
    ranked = runs()
    example(qrels, ranked, args.permutations)
    values = per_query(qrels, ranked)
    ties(values, args.permutations)
    null_size(values, args.trials, args.permutations)


if __name__ == "__main__":
    main()
