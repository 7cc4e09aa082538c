"""Small-run latency: `relgrade evaluate` of one TREC DL 2019 run, wall time in a fresh process.

Builds (seeded, into a temp folder) a run of 39,726 lines over the 43 judged queries of TREC DL
2019 passages (`/work/shared/data/trec-dl-2019`, or --data): each query's judged passages scored
by an LLM label set plus noise, and other passages of the pool below them, as a reranker's
output looks. Then times, each in a subprocess, in turns (one round runs every command once, so
load that comes and goes on a shared machine falls on all of them alike), after one untimed
warm-up each, median of --repeat rounds:

- `relgrade evaluate 2019qrels-pass.txt run.txt` (the default measures, table output), run as
  the installed `relgrade` script runs it (`from grader.cli.main import main`) from this
  checkout (PYTHONPATH), with a bytecode cache as an installed copy has one (the warm-up
  writes it into a temp folder, PYTHONPYCACHEPREFIX; --no-bytecode-cache compiles every
  module on every run instead, as under PYTHONDONTWRITEBYTECODE=1);
- the same with `--format json` (no table, so no rich);
- with --baseline DIR, `relgrade evaluate` of another source tree (e.g. `git archive` of an
  older commit unpacked there), for a before/after ratio measured in the same turns;
- `relgrade --help`, and `python -c pass` (the interpreter's own start);
- trec_eval 10 (the C binary) on the same files, when its source is there (built into a temp
  folder) or --trec-eval names a binary: for scale, a C program has no interpreter to start.

It prints each median against the 0.3 s goal and the load average before and after. With
--importtime it also prints the modules `relgrade evaluate` imports whose own import is slowest
(`python -X importtime`), to see what the path pays for.

    python bench/evaluate_small.py [--repeat 15] [--data DIR] [--trec-eval PATH] [--importtime]
        [--baseline DIR] [--no-bytecode-cache]
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
LINES = 39_726
LABELS = "llm-labels/dl2019_test_4prompts_llama70b.txt"
GOAL = 0.3
TREC_EVAL_SOURCE = DATA.parents[1] / "tools" / "trec_eval"
ENTRY = "import sys; from grader.cli.main import main; sys.exit(main())"  # the `relgrade` script


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


Measured = tuple[list[float], list[float]]


def in_turns(
    commands: dict[str, list[str]], env: dict[str, str], repeat: int
) -> dict[str, Measured]:
    """(wall times, CPU times) of each command in fresh processes, one of each per round (one
    untimed warm-up each first). CPU time (user + system, the child's rusage) says what the
    process costs when other load on a shared machine stretches the wall time."""
    for cmd in commands.values():
        subprocess.run(cmd, check=True, capture_output=True, env=env)
    times: dict[str, Measured] = {name: ([], []) for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
            )
            _, status, usage = os.wait4(proc.pid, 0)
            times[name][0].append(time.perf_counter() - t0)
            times[name][1].append(usage.ru_utime + usage.ru_stime)
            if os.waitstatus_to_exitcode(status):
                raise RuntimeError(f"{cmd} failed")
    return times


def child_env(source: Path, cache: Path | None) -> dict[str, str]:
    """The environment of a child that runs `relgrade` from the checkout at `source`: with a
    bytecode cache in `cache`, or (None) compiling every module on every run."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    env["PYTHONPATH"] = str(source)
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def with_source(source: Path, cmd: list[str]) -> list[str]:
    """`cmd` (a python -c command) with `source` first on sys.path, whatever PYTHONPATH says."""
    python, flag, code, *args = cmd
    return [python, flag, f"import sys; sys.path.insert(0, {str(source)!r}); {code}", *args]


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


def import_profile(
    cmd: list[str], env: dict[str, str], top: int = 15, runs: int = 5
) -> list[tuple[int, int, str]]:
    """(own microseconds, cumulative microseconds, module) of the `top` modules of `cmd` whose
    own import takes longest (the cumulative time counts the modules they import too), each
    the least of `runs` runs: one run on a shared machine is often preempted somewhere."""
    best: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
            check=True,
        )
        this: dict[str, tuple[int, int]] = {}  # a module can be listed twice (a re-import)
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "|" not in line:
                continue
            own, total, name = (part.strip() for part in line[len("import time:") :].split("|"))
            if own.isdigit() and total.isdigit():
                was = this.get(name, (0, 0))
                this[name] = (was[0] + int(own), max(was[1], int(total)))
        for name, (own_us, total_us) in this.items():
            seen = best.get(name, (own_us, total_us))
            best[name] = (min(seen[0], own_us), min(seen[1], total_us))
    rows = [(own, total, name) for name, (own, total) in best.items()]
    return sorted(rows, reverse=True)[:top]


def _summary(measured: Measured, goal: float | None = None) -> str:
    times, cpu = measured
    median = statistics.median(times)
    text = (
        f"median {median:.3f} s (min {min(times):.3f}, max {max(times):.3f}), "
        f"CPU median {statistics.median(cpu):.3f} s"
    )
    return text if goal is None else f"{text}: {median / goal:.2f} of the {goal} s goal"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--data", type=Path, default=DATA, help="the TREC DL 2019 folder")
    parser.add_argument("--trec-eval", type=Path, help="a trec_eval binary (default: build it)")
    parser.add_argument("--importtime", action="store_true", help="print the slowest imports")
    parser.add_argument("--baseline", type=Path, help="another source tree to time alike")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="compile every module on every run"
    )
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
        cache = None if args.no_bytecode_cache else Path(tmp) / "pycache"
        env = child_env(ROOT, cache)
        relgrade = [python, "-c", ENTRY]
        evaluate = [*relgrade, "evaluate", str(qrels), str(run)]
        commands = {
            "relgrade evaluate": evaluate,
            "  --format json": [*evaluate, "--format", "json"],
            "relgrade --help": [*relgrade, "--help"],
            "python -c pass": [python, "-c", "pass"],
        }
        if args.baseline is not None:
            commands["baseline evaluate"] = with_source(args.baseline.resolve(), evaluate)
        binary = args.trec_eval or build_trec_eval(TREC_EVAL_SOURCE, Path(tmp))
        if binary is not None:
            commands["trec_eval"] = [
                str(binary),
                "-c",
                "-m",
                "ndcg_cut.10",
                "-m",
                "recip_rank",
                str(qrels),
                str(run),
            ]
        cached = "a bytecode cache" if cache is not None else "no bytecode cache"
        print(f"{args.repeat} rounds, {cached}; load average before: {_load()}")
        measured = in_turns(commands, env, args.repeat)
        for name, times in measured.items():
            goal = GOAL if name in ("relgrade evaluate", "  --format json") else None
            print(f"{name:19s} {_summary(times, goal)}")
        if args.baseline is not None:
            ratio = statistics.median(measured["relgrade evaluate"][0]) / statistics.median(
                measured["baseline evaluate"][0]
            )
            print(f"relgrade evaluate / baseline (medians): {ratio:.2f}")
        if binary is None:
            print(f"trec_eval: no source at {TREC_EVAL_SOURCE} (or pass --trec-eval)")
        print(f"load average after: {_load()}")
        median = statistics.median(measured["relgrade evaluate"][0])
        print(f"goal evaluate <= {GOAL} s: {'met' if median <= GOAL else 'NOT met'}")
        if args.importtime:
            print("slowest imports of `relgrade evaluate` (own time, with what they import):")
            for own, cumulative, name in import_profile(evaluate, env):
                print(f"  {own / 1e6:7.3f} s  ({cumulative / 1e6:.3f} s)  {name}")
    return 0


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
