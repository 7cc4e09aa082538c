"""Metrics speed and memory: `relgrade evaluate` against trec_eval and pytrec_eval, same files.

Generates (seeded, into a temp folder, or --data) a run of 10,000 queries x 1,000 ranked docs
and qrels with ~50 judged docs per query, then runs each side end to end from the files in its
own child process, timing it and taking its peak resident memory (the child's ru_maxrss):

- relgrade: `relgrade evaluate QRELS RUN -m nDCG@10 RR(rel=2)@10 R(rel=2)@100 P(rel=2)@10
  --format json` (the command users run: imports, reading, checks, ranking, output);
- trec_eval 10 (the C binary): `trec_eval -c -l 2 -m ndcg_cut.10 -m recip_rank -m recall.100
  -m P.10`, built from its source into a temp folder when ../shared/tools/trec_eval is there
  (or --trec-eval SOURCE_OR_BINARY, or $RELGRADE_TREC_EVAL);
- pytrec_eval: its own `parse_qrel` / `parse_run` of the same files into dicts +
  `RelevanceEvaluator(..., relevance_level=2).evaluate` for ndcg_cut.10, recip_rank,
  recall.100, P.10, plus the means.

trec_eval has no cutoff for recip_rank, so its side computes recip_rank over the whole ranking
(at least as much work as RR@10). Outside the timed runs the script checks that relgrade's
means equal pytrec_eval's to 1e-9 (RR@10 against recip_rank on the run cut to its top 10) and
trec_eval's printed 4 decimals.

Prints each side's time and peak memory and the ratios to trec_eval (goals: time <= 0.5x,
memory <= 1x) and to pytrec_eval. With --repeat N (default 2) the sides alternate N times and
the best time (and the peak memory of that best run) of each is shown, which keeps other load on
a shared machine from deciding the ratio.

    python bench/metrics_speed.py [--queries 10000] [--docs 1000] [--judged 50] [--seed 0]
        [--trec-eval PATH] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402
import pytrec_eval  # noqa: E402

MEASURES = ["nDCG@10", "RR(rel=2)@10", "R(rel=2)@100", "P(rel=2)@10"]
TREC_MEASURES = {"ndcg_cut.10", "recip_rank", "recall.100", "P.10"}
SAME = {
    "nDCG@10": "ndcg_cut_10",
    "R(rel=2)@100": "recall_100",
    "P(rel=2)@10": "P_10",
}
TREC_EVAL_SOURCE = ROOT.parent / "shared" / "tools" / "trec_eval"
TREC_EVAL_NAMES = {"ndcg_cut_10": "nDCG@10", "recall_100": "R(rel=2)@100", "P_10": "P(rel=2)@10"}


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


# Linux counts the memory a process had before exec in its peak (ru_maxrss): a child forked
# from this process, which holds the generated data, would report at least this process's size.
# So each command is started by a small launcher process and measured there.
_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(proc.pid, 0)
sys.stderr.write(f"\\n{MARK} {usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""
MARK = "bench-peak-rss-kib"


def child(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes, stdout) of `cmd` run in a child process (started by
    a small launcher, see _LAUNCHER)."""
    launcher = _LAUNCHER.replace("{MARK}", MARK)
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", launcher, *cmd], stdout=out, stderr=subprocess.PIPE, cwd=ROOT
        )
        _, err = proc.communicate()
        elapsed = time.perf_counter() - t0
        text = err.decode()
        if proc.returncode:
            raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}): {text[-2000:]}")
        peak = int(text.rsplit(MARK, 1)[1].split()[0])
        out.seek(0)
        return elapsed, peak * 1024, out.read().decode()


def build_trec_eval(given: Path | None, into: Path) -> Path | None:
    """A trec_eval binary: `given` (a binary, or a source folder built here) or the shared source
    built into `into`; None when there is none."""
    source = given or TREC_EVAL_SOURCE
    if source.is_file():
        return source
    if not (source / "Makefile").exists() or shutil.which("make") is None:
        return None
    folder = into / "trec_eval"
    shutil.copytree(source, folder)
    for path in [folder, *folder.iterdir()]:
        path.chmod(path.stat().st_mode | 0o200)  # the shared source is read-only
    done = subprocess.run(["make", "-C", str(folder)], capture_output=True)
    binary = folder / "trec_eval"
    if done.returncode or not binary.exists():
        print(f"trec_eval did not build: {done.stderr.decode()[-500:]}", file=sys.stderr)
        return None
    return binary


def trec_eval_means(text: str) -> dict[str, float]:
    """The "all" rows of trec_eval's output, by relgrade's measure names."""
    means = {}
    for line in text.splitlines():
        name, query, value = line.split()
        if query == "all" and name in TREC_EVAL_NAMES:
            means[TREC_EVAL_NAMES[name]] = float(value)
    return means


def pytrec_eval_side(qrels_path: Path, run_path: Path) -> dict[str, float]:
    """pytrec_eval's parse, evaluate and means (what its child process runs)."""
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs per side")
    parser.add_argument(
        "--data", type=Path, help="folder to keep the generated files in (reused when present)"
    )
    parser.add_argument(
        "--trec-eval",
        type=Path,
        default=os.environ.get("RELGRADE_TREC_EVAL"),
        help="a trec_eval binary or source folder (default: ../shared/tools/trec_eval)",
    )
    parser.add_argument("--no-check", action="store_true", help="skip the agreement check")
    parser.add_argument("--side", nargs=2, metavar=("QRELS", "RUN"), help=argparse.SUPPRESS)
    return parser


def _prepare(folder: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    """The run and qrels files in `folder` (generated unless there), told and warmed."""
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
    return run_path, qrels_path


def _sides(
    qrels_path: Path, run_path: Path, trec_eval: Path | None, tmp: Path
) -> dict[str, list[str]]:
    """The command of each side: relgrade, pytrec_eval and (when it builds) trec_eval."""
    python, files = sys.executable, [str(qrels_path), str(run_path)]
    evaluate = [python, "-m", "grader.cli.main", "evaluate", *files, "--format", "json"]
    sides = {
        "relgrade": [*evaluate, "-m", *MEASURES],
        "pytrec_eval": [python, str(Path(__file__).resolve()), "--side", *files],
    }
    binary = build_trec_eval(trec_eval, tmp)
    if binary is not None:
        levels = ["-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "recall.100", "-m", "P.10"]
        sides["trec_eval"] = [str(binary), "-c", "-l", "2", *levels, *files]
    else:
        print(f"trec_eval: no source at {TREC_EVAL_SOURCE} (or pass --trec-eval)")
    return sides


def _race(sides: dict[str, list[str]], repeat: int) -> tuple[dict[str, str], dict[str, float]]:
    """Run the sides in turn `repeat` times; print each one's best time and peak memory and
    the ratios to relgrade's; each side's output, and relgrade's means."""
    best: dict[str, tuple[float, int]] = {}
    runs: dict[str, list[float]] = {name: [] for name in sides}
    outputs: dict[str, str] = {}
    for _ in range(max(repeat, 1)):
        for name, cmd in sides.items():
            elapsed, peak, outputs[name] = child(cmd)
            runs[name].append(elapsed)
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, peak)
    for name in sides:
        times = ", ".join(f"{t:.2f}" for t in runs[name])
        elapsed, peak = best[name]
        print(f"{name:12s} best {elapsed:7.2f} s  (runs: {times})  peak RSS {peak / 1e6:,.0f} MB")
    ours_t, ours_m = best["relgrade"]
    for peer in ("trec_eval", "pytrec_eval"):
        if peer in best:
            peer_t, peer_m = best[peer]
            goals = "  (goals: time <= 0.5, memory <= 1.0)" if peer == "trec_eval" else ""
            ratios = f"time {ours_t / peer_t:.2f}, peak memory {ours_m / peer_m:.2f}"
            print(f"relgrade / {peer}: {ratios}{goals}")
    ours = {r["measure"]: r["value"] for r in json.loads(outputs["relgrade"])}
    for m in MEASURES:
        print(f"  {m:14s} {ours[m]:.6f}")
    return outputs, ours


def _agree(
    qrels_path: Path,
    run_path: Path,
    outputs: dict[str, str],
    ours: dict[str, float],
    theirs: dict[str, float],
) -> int:
    """1 (each disagreement printed) unless relgrade's means equal the others'."""
    problems = check_agreement(qrels_path, run_path, ours, theirs)
    if "trec_eval" in outputs:
        problems += [
            f"{m}: relgrade {ours[m]!r} != trec_eval {v!r}"
            for m, v in trec_eval_means(outputs["trec_eval"]).items()
            if abs(ours[m] - v) > 5e-5
        ]
    for problem in problems:
        print("DISAGREEMENT", problem)
    if problems:
        return 1
    print("all means equal to pytrec_eval's within 1e-9 (and trec_eval's 4 decimals)")
    return 0


def main() -> int:
    args = _parser().parse_args()
    if args.side:  # the pytrec_eval child
        print(json.dumps(pytrec_eval_side(Path(args.side[0]), Path(args.side[1]))))
        return 0
    with tempfile.TemporaryDirectory(prefix="relgrade-bench-") as tmp:
        run_path, qrels_path = _prepare(args.data or Path(tmp), args)
        sides = _sides(qrels_path, run_path, args.trec_eval, Path(tmp))
        outputs, ours = _race(sides, args.repeat)
        theirs = json.loads(outputs["pytrec_eval"])
        if not args.no_check:
            return _agree(qrels_path, run_path, outputs, ours, theirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
