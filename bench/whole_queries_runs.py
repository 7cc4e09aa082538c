"""Per-run mean measures from a few whole queries: coverage of the human-only t interval that
`calibrate` gives below 10 whole queries, and of PPI++ with lambda fitted on the same queries.

TREC DL 2019: the six runs of tests/helpers/fill_data.dl2019_runs over the judged pool, scored
per query with nDCG@10 under the NIST qrels (people) and under each of the five shared label
sets (the LLM). m of the 43 queries are drawn at random (--draws per run and label set); the
library's `ppi_mean` over queries (as `calibration.estimates_section.run_estimates` calls it:
Student's t with m - 1 df, finite-population correction, lambda 0 for human-only) gives the
interval; the truth is the run's mean nDCG@10 over the 43 queries under the NIST qrels.

    python bench/whole_queries_runs.py [--draws 1000] [--queries 3 6 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.estimates_section import per_query_scores  # noqa: E402
from calibration.stats.ppi import ppi_mean  # noqa: E402
from tests.helpers.fill_data import dl2019_runs, human_qrels, label_set  # noqa: E402
from tests.helpers.spotcheck_sim import LABEL_SETS  # noqa: E402

MEASURE = "nDCG@10"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--queries", type=int, nargs="+", default=[3, 6, 12])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    people = human_qrels()
    runs = dl2019_runs()
    human = {name: per_query_scores(people, run, MEASURE) for name, run in runs.items()}
    llm = {
        (name, s): per_query_scores(label_set(s), run, MEASURE).reindex(human[name].index)
        for name, run in runs.items()
        for s in LABEL_SETS
    }
    n_q = len(next(iter(human.values())))
    print(
        f"{MEASURE} of {len(runs)} runs over {n_q} queries; {args.draws} draws of m whole "
        f"queries per run (x {len(LABEL_SETS)} label sets for PPI++)"
    )
    print(
        f"{'m':>3} {'human-only t: mean':>19} {'worst run':>10} {'PPI++ t: mean':>14} {'worst':>7}"
    )
    for m in args.queries:
        rng = np.random.default_rng(args.seed + m)
        draws = [rng.permutation(n_q)[:m] for _ in range(args.draws)]
        human_cov: dict[str, float] = {}
        ppi_cov: list[float] = []
        for name in runs:
            y = human[name].to_numpy(dtype=np.float64)
            truth = float(y.mean())
            hits = []
            for rows in draws:
                rest = np.setdiff1d(np.arange(n_q), rows)
                est = ppi_mean(y[rows], y[rows], y[rest], lam=0.0, bounds=(0, 1), quantile="t")
                hits.append(est.human_ci[0] <= truth <= est.human_ci[1])
            human_cov[name] = float(np.mean(hits))
            for s in LABEL_SETS:
                f = llm[(name, s)].to_numpy(dtype=np.float64)
                hits = []
                for rows in draws:
                    rest = np.setdiff1d(np.arange(n_q), rows)
                    est = ppi_mean(y[rows], f[rows], f[rest], bounds=(0, 1), quantile="t")
                    hits.append(est.ppi_ci[0] <= truth <= est.ppi_ci[1])
                ppi_cov.append(float(np.mean(hits)))
        values = list(human_cov.values())
        worst = min(human_cov, key=lambda k: human_cov[k])
        print(
            f"{m:>3} {np.mean(values):>19.1%} {min(values):>10.1%} {np.mean(ppi_cov):>14.1%} "
            f"{min(ppi_cov):>7.1%}   (worst human-only run: {worst})"
        )


if __name__ == "__main__":
    main()
