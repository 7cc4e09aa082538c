"""Metrics speed: `relgrade` against pytrec_eval, end to end from the same TREC files on disk.

Generates (seeded, into a temp folder) a run of 10,000 queries x 1,000 ranked docs and qrels
with ~50 judged docs per query, then in this one process times:

- relgrade: `read_qrels` + `read_run` (trec_eval ranking, duplicate and format checks) +
  `evaluate` + `mean_scores` for nDCG@10, RR(rel=2)@10, R(rel=2)@100, P(rel=2)@10;
- pytrec_eval: its own `parse_qrel` / `parse_run` of the same files into dicts +
  `RelevanceEvaluator(..., relevance_level=2).evaluate` for ndcg_cut.10, recip_rank,
  recall.100, P.10, plus the means.

trec_eval has no cutoff for recip_rank, so pytrec_eval's timed side computes recip_rank over
the whole ranking (at least as much work as RR@10, and cutting the dicts to their top 10 first
would only add Python time to the peer). Outside the timed regions the script checks that
both sides agree to 1e-9 on every mean, RR@10 against recip_rank on the run cut to its top 10.

Prints both times, the ratio relgrade / pytrec_eval (goal <= 1.0, aim 0.5) and each side's
peak resident memory (sampled from /proc every 20 ms while it runs) above its starting point.
With --repeat N (default 2) the sides alternate N times and the best time of each is shown,
which keeps other load on a shared machine from deciding the ratio.

    python bench/metrics_speed.py [--queries 10000] [--docs 1000] [--judged 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402
import pytrec_eval  # noqa: E402

from grader.io.trec import read_qrels, read_run  # noqa: E402
from grader.metrics import evaluate, mean_scores  # noqa: E402

MEASURES = ["nDCG@10", "RR(rel=2)@10", "R(rel=2)@100", "P(rel=2)@10"]
TREC_MEASURES = {"ndcg_cut.10", "recip_rank", "recall.100", "P.10"}
SAME = {
    "nDCG@10": "ndcg_cut_10",
    "R(rel=2)@100": "recall_100",
    "P(rel=2)@10": "P_10",
}
PAGE = os.sysconf("SC_PAGE_SIZE")


def _write_table(path: Path, columns: dict[str, pa.Array]) -> None:
    table = pa.table(columns)
    options = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    pacsv.write_csv(table, str(path), write_options=options)


def generate(folder: Path, n_queries: int, n_docs: int, n_judged: int, seed: int) -> None:
    """A realistic run (sorted by score, ranks 1..n, some tied scores) and ~n_judged qrels/query."""
    rng = np.random.default_rng(seed)
    total = n_queries * n_docs
    query = np.repeat(np.arange(n_queries), n_docs)
    # doc ids from an 8.8M-passage corpus (MS MARCO size), unique within each query
    doc = (rng.integers(0, 8_800_000 // n_docs, size=total) * n_docs) + np.tile(
        np.arange(n_docs), n_queries
    )
    scores = np.sort(np.round(rng.gamma(2.0, 5.0, size=(n_queries, n_docs)), 3), axis=1)[:, ::-1]
    qid = pc.binary_join_element_wise("", pc.cast(pa.array(query + 100_000), pa.string()), "")
    did = pc.cast(pa.array(doc), pa.string())
    _write_table(
        folder / "run.txt",
        {
            "q": qid,
            "q0": pa.array(np.full(total, "Q0", dtype=object), pa.string()),
            "d": did,
            "rank": pa.array(np.tile(np.arange(1, n_docs + 1), n_queries)),
            "score": pa.array(scores.ravel()),
            "tag": pa.array(np.full(total, "bench", dtype=object), pa.string()),
        },
    )
    # judged: ~60% drawn from the run (biased to its top), the rest never retrieved
    from_run = int(n_judged * 0.6)
    picks = np.minimum(rng.geometric(1 / 60, size=(n_queries, from_run)), n_docs) - 1
    picks = np.sort(picks, axis=1)
    dup = np.zeros_like(picks, dtype=bool)
    dup[:, 1:] = picks[:, 1:] == picks[:, :-1]
    rows = (np.arange(n_queries)[:, None] * n_docs + picks)[~dup]
    judged_q = np.concatenate([query[rows], np.repeat(np.arange(n_queries), n_judged - from_run)])
    judged_d = np.concatenate([doc[rows], 9_000_000 + np.arange(n_queries * (n_judged - from_run))])
    grades = rng.choice(4, size=len(judged_q), p=[0.5, 0.25, 0.15, 0.10])
    order = np.argsort(judged_q, kind="stable")
    _write_table(
        folder / "qrels.txt",
        {
            "q": pc.cast(pa.array(judged_q[order] + 100_000), pa.string()),
            "it": pa.array(np.zeros(len(order), dtype=np.int64)),
            "d": pc.cast(pa.array(judged_d[order]), pa.string()),
            "g": pa.array(grades[order]),
        },
    )


class PeakRSS:
    """Peak resident set size of this process while the block runs (sampled every 5 ms)."""

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * PAGE

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())


def _release_memory() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    pa.default_memory_pool().release_unused()


def time_it(fn: Callable[[], Any]) -> tuple[float, Any, PeakRSS]:
    _release_memory()
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
    return elapsed, result, mem


def relgrade_side(qrels_path: Path, run_path: Path) -> dict[str, float]:
    qrels = read_qrels(qrels_path)
    run = read_run(run_path)
    means = mean_scores(evaluate(qrels, run, MEASURES))
    return dict(zip(means["measure"], means["value"], strict=True))


def pytrec_eval_side(qrels_path: Path, run_path: Path) -> dict[str, float]:
    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with open(run_path) as fh:
        run = pytrec_eval.parse_run(fh)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=2)
    per_query = evaluator.evaluate(run)
    names = next(iter(per_query.values())).keys()
    return {
        name: pytrec_eval.compute_aggregated_measure(name, [v[name] for v in per_query.values()])
        for name in names
    }


def check_agreement(
    qrels_path: Path, run_path: Path, ours: dict[str, float], theirs: dict[str, float]
) -> list[str]:
    """Every relgrade mean equals trec_eval's (RR@10 via recip_rank on the top-10 cut)."""
    problems = [
        f"{m}: relgrade {ours[m]!r} != pytrec_eval {theirs[t]!r}"
        for m, t in SAME.items()
        if abs(ours[m] - theirs[t]) > 1e-9
    ]
    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    top10: dict[str, dict[str, float]] = {}
    with open(run_path) as fh:
        for line in fh:  # the file is in trec_eval order already (written sorted, ranks 1..n)
            q, _, d, _, s, _ = line.split()
            docs = top10.setdefault(q, {})
            if len(docs) < 10:
                docs[d] = float(s)
    cut = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=2).evaluate(top10)
    rr10 = float(np.mean([v["recip_rank"] for v in cut.values()]))
    if abs(ours["RR(rel=2)@10"] - rr10) > 1e-9:
        problems.append(f"RR(rel=2)@10: relgrade {ours['RR(rel=2)@10']!r} != {rr10!r}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs per side")
    parser.add_argument(
        "--data", type=Path, help="folder to keep the generated files in (reused when present)"
    )
    parser.add_argument("--no-check", action="store_true", help="skip the agreement check")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="relgrade-bench-") as tmp:
        folder = args.data or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        run_path, qrels_path = folder / "run.txt", folder / "qrels.txt"
        t0 = time.perf_counter()
        if not (run_path.exists() and qrels_path.exists()):
            generate(folder, args.queries, args.docs, args.judged, args.seed)
        n_lines = run_path.read_bytes().count(b"\n")
        n_qrels = qrels_path.read_bytes().count(b"\n")  # also warms the page cache for both
        print(
            f"{n_lines:,} run lines ({run_path.stat().st_size / 1e6:.0f} MB), "
            f"{n_qrels:,} qrels lines, ready in {time.perf_counter() - t0:.1f}s"
        )
        times: dict[str, list[float]] = {"relgrade": [], "pytrec_eval": []}
        growth: dict[str, int] = {"relgrade": 0, "pytrec_eval": 0}
        sides: dict[str, Callable[[Path, Path], dict[str, float]]] = {
            "relgrade": relgrade_side,
            "pytrec_eval": pytrec_eval_side,
        }
        results: dict[str, dict[str, float]] = {}
        for _ in range(max(args.repeat, 1)):
            for name, side in sides.items():
                elapsed, results[name], mem = time_it(partial(side, qrels_path, run_path))
                times[name].append(elapsed)
                growth[name] = max(growth[name], mem.peak - mem.start)
        ours, theirs = results["relgrade"], results["pytrec_eval"]
        for name in sides:
            runs = ", ".join(f"{t:.2f}" for t in times[name])
            print(
                f"{name:12s} best {min(times[name]):7.2f} s  (runs: {runs})  "
                f"peak RSS +{growth[name] / 1e6:,.0f} MB"
            )
        ratio = min(times["relgrade"]) / min(times["pytrec_eval"])
        print(f"ratio relgrade / pytrec_eval = {ratio:.2f}  (goal <= 1.0, aim 0.5)")
        for m in MEASURES:
            print(f"  {m:14s} {ours[m]:.6f}")
        if not args.no_check:
            problems = check_agreement(qrels_path, run_path, ours, theirs)
            for p in problems:
                print("DISAGREEMENT", p)
            if problems:
                return 1
            print("all means equal to pytrec_eval's within 1e-9")
    return 0


if __name__ == "__main__":
    sys.exit(main())
