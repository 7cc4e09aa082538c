"""Small-run latency: `relgrade evaluate` of one TREC DL 2019 run, wall time in a fresh process.

Builds (seeded, into a temp folder) a run of 39,726 lines over the 43 judged queries of TREC DL
2019 passages (`/work/shared/data/trec-dl-2019`, or --data): each query's judged passages scored
by an LLM label set plus noise, and other passages of the pool below them, as a reranker's
output looks. Then times, each in a subprocess (median of --repeat runs, after one warm-up):

- `relgrade evaluate 2019qrels-pass.txt run.txt` (the default measures, table output);
- `relgrade --help`;
- trec_eval 10 (the C binary) on the same files, when its source is there (built into a temp
  folder) or --trec-eval names a binary: for scale, a C program has no interpreter to start.

With --importtime it also prints the modules `relgrade evaluate` imports, slowest first
(`python -X importtime`, cumulative microseconds), to see what the path pays for.

    python bench/evaluate_small.py [--repeat 15] [--data DIR] [--trec-eval PATH] [--importtime]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RELGRADE_DL2019", "/work/shared/data/trec-dl-2019"))
TREC_EVAL_SOURCE = ROOT.parent / "shared" / "tools" / "trec_eval"
LINES = 39_726
LABELS = "llm-labels/dl2019_test_4prompts_llama70b.txt"
GOAL = 0.3


def write_dl_run(data: Path, path: Path, lines: int = LINES, seed: int = 0) -> None:
    """A reranker-like run of `lines` lines over the judged queries of TREC DL 2019 passages."""
    rng = np.random.default_rng(seed)
    labels: dict[str, dict[str, int]] = {}
    with open(data / LABELS) as fh:
        for line in fh:
            qid, _, docid, grade = line.split()
            labels.setdefault(qid, {})[docid] = int(grade)
    with open(data / "dl2019_document.jsonl") as fh:
        pool = [json.loads(line)["docid"] for line in fh]
    queries = sorted(labels)
    per_query = [lines // len(queries) + (i < lines % len(queries)) for i in range(len(queries))]
    with open(path, "w") as out:
        for qid, n in zip(queries, per_query, strict=True):
            judged = labels[qid]
            scored = {d: g + rng.normal(0.0, 1.0) for d, g in judged.items()}
            for d in rng.permutation(pool):
                if len(scored) >= n:
                    break
                if d not in scored:
                    scored[d] = rng.normal(-1.0, 1.0)
            ranked = sorted(scored.items(), key=lambda kv: -kv[1])[:n]
            for rank, (d, s) in enumerate(ranked, 1):
                out.write(f"{qid} Q0 {d} {rank} {s:.4f} dl-rerank\n")


def wall(cmd: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """(wall times, CPU times) of `cmd` in fresh processes (one untimed warm-up first). CPU time
    (user + system, the child's rusage) says what the process costs when other load on a shared
    machine stretches the wall time."""
    subprocess.run(cmd, check=True, capture_output=True)
    times, cpu = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - t0)
        cpu.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status):
            raise RuntimeError(f"{cmd} failed")
    return times, cpu


def build_trec_eval(source: Path, into: Path) -> Path | None:
    """Build trec_eval from its source folder into `into`; None when that cannot be done."""
    if not (source / "Makefile").exists() or shutil.which("make") is None:
        return None
    folder = into / "trec_eval"
    shutil.copytree(source, folder)
    for p in [folder, *folder.iterdir()]:
        p.chmod(p.stat().st_mode | 0o200)
    done = subprocess.run(["make", "-C", str(folder)], capture_output=True)
    binary = folder / "trec_eval"
    return binary if done.returncode == 0 and binary.exists() else None


def import_profile(cmd: list[str], top: int = 15) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the slowest top-level imports of `cmd`."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit() and not name.startswith(" "):
            rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:top]


def _summary(measured: tuple[list[float], list[float]]) -> str:
    times, cpu = measured
    return (
        f"median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}), "
        f"CPU median {statistics.median(cpu):.3f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--data", type=Path, default=DATA, help="the TREC DL 2019 folder")
    parser.add_argument("--trec-eval", type=Path, help="a trec_eval binary (default: build it)")
    parser.add_argument("--importtime", action="store_true", help="print the slowest imports")
    args = parser.parse_args()
    if not (args.data / "2019qrels-pass.txt").exists():
        print(f"no TREC DL 2019 data in {args.data} (--data)", file=sys.stderr)
        return 2
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="relgrade-bench-") as tmp:
        run = Path(tmp) / "dl2019-rerank.txt"
        write_dl_run(args.data, run)
        qrels = args.data / "2019qrels-pass.txt"
        n_lines = run.read_bytes().count(b"\n")
        print(f"run: {n_lines:,} lines over 43 queries; qrels: {qrels}")
        evaluate = [python, "-m", "grader.cli.main", "evaluate", str(qrels), str(run)]
        help_cmd = [python, "-m", "grader.cli.main", "--help"]
        t_eval = wall(evaluate, args.repeat)
        t_help = wall(help_cmd, args.repeat)
        t_bare = wall([python, "-c", "pass"], args.repeat)
        print(f"relgrade evaluate  {_summary(t_eval)}  (goal <= {GOAL} s)")
        print(f"relgrade --help    {_summary(t_help)}")
        print(f"python -c pass     {_summary(t_bare)}  (the interpreter's own start)")
        binary = args.trec_eval or build_trec_eval(TREC_EVAL_SOURCE, Path(tmp))
        if binary is not None:
            cmd = [str(binary), "-c", "-m", "ndcg_cut.10", "-m", "recip_rank", str(qrels), str(run)]
            print(f"trec_eval          {_summary(wall(cmd, args.repeat))}")
        else:
            print(f"trec_eval: no source at {TREC_EVAL_SOURCE} (or pass --trec-eval)")
        verdict = "met" if statistics.median(t_eval[0]) <= GOAL else "NOT met"
        print(f"goal evaluate <= {GOAL} s: {verdict}")
        if args.importtime:
            print("slowest imports of `relgrade evaluate` (cumulative):")
            for micros, name in import_profile(evaluate):
                print(f"  {micros / 1e6:7.3f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
