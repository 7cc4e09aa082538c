"""Grading at scale: the million-pair workload of the lexical judge, first run and rerun.

Generates (seeded) a pool of 100,000 passages, `--pairs / 100` queries and one run naming 100
passages per query, then runs `relgrade grade --judge lexical --depth 100` in a subprocess:

- the first run (grades every pair, writes --out and --qrels-out);
- an unchanged rerun (sends nothing; writes --out and --qrels-out again), goal <= 10 s;
- `--dry-run` over the same store, goal <= 5 s;

and prints for each its wall time and peak memory (the child's max RSS, goal <= 1.5 GB for the
rerun), the store's size per judgment (goal <= 700 bytes), and the size per judgment of LLM
judgments (reason, distribution, usage and one call-log row each) stored the same way.

    python bench/grade_scale.py [--pairs 1000000] [--pool 100000] [--seed 1] [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.models import CallRecord, Judgment, PromptRef, Usage  # noqa: E402
from grader.store.store import Store  # noqa: E402

DOCS_PER_QUERY = 100
RERUN_GOAL_S = 10.0
DRY_RUN_GOAL_S = 5.0
MEMORY_GOAL_MB = 1500.0
BYTES_GOAL = 700.0


def make_words(rng: random.Random, n: int) -> list[str]:
    """n distinct pseudo-words of 3 to 9 letters."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choices(letters, k=rng.randint(3, 9)))] = None
    return list(words)


def write_workload(folder: Path, pairs: int, pool: int, seed: int) -> tuple[Path, Path, Path]:
    """queries.tsv, docs.jsonl and run.txt of the workload (Zipf-like word frequencies)."""
    rng = random.Random(seed)
    words = make_words(rng, 20_000)
    cum: list[float] = []
    total = 0.0
    for rank in range(len(words)):
        total += 1.0 / (rank + 1)
        cum.append(total)
    queries, docs, run = folder / "queries.tsv", folder / "docs.jsonl", folder / "run.txt"
    with docs.open("w", encoding="utf-8") as out:
        for d in range(pool):
            text = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(30, 80)))
            out.write(json.dumps({"doc_id": f"D{d}", "text": text}) + "\n")
    n_queries = max(1, pairs // DOCS_PER_QUERY)
    with queries.open("w", encoding="utf-8") as out:
        for q in range(n_queries):
            out.write(f"Q{q}\t{' '.join(rng.choices(words[:5000], k=rng.randint(3, 8)))}\n")
    with run.open("w", encoding="utf-8") as out:
        for q in range(n_queries):
            for rank, d in enumerate(rng.sample(range(pool), DOCS_PER_QUERY), start=1):
                out.write(f"Q{q} Q0 D{d} {rank} {1000 - rank} bench\n")
    return queries, docs, run


def run_grade(args: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, stderr's last line with the child's CPU seconds) of one
    `relgrade grade` in a child process."""
    cmd = [sys.executable, "-m", "grader.cli.main", "grade", *args]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"relgrade grade exited {proc.returncode}: {err[-2000:]}")
    last = err.strip().splitlines()[-1] if err.strip() else ""
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, usage.ru_maxrss / 1024.0, f"[{cpu:.1f} CPU-s] {last}"


def store_bytes(path: Path) -> int:
    """The store's size once its WAL is checkpointed into the main file."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def bytes_by_table(path: Path, n: int) -> str:
    """The store's bytes per judgment by table and index (SQLite's dbstat), largest first."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6"
        ).fetchall()
    conn.close()
    return ", ".join(f"{name} {size / n:,.0f}" for name, size in rows)


def llm_bytes_per_judgment(folder: Path, n: int) -> tuple[float, str]:
    """Bytes per LLM-like judgment (reason, distribution, usage, cost) with one logged call each."""
    rng = random.Random(7)
    path = folder / "llm.db"
    for name in ("llm.db", "llm.db-wal", "llm.db-shm"):  # a kept folder's: measure afresh
        (folder / name).unlink(missing_ok=True)
    store = Store(path)
    prompt = PromptRef(name="passage", version="1", sha256="ab" * 32)
    reasons = make_words(rng, 2000)
    fingerprint = {"judge": "openai:gpt-4o-mini", "model": "gpt-4o-mini", "prompt": "ab" * 32}
    for start in range(0, n, 1000):
        items, calls = [], []
        for i in range(start, min(n, start + 1000)):
            key = f"sha256:{i:064x}"
            dist = [rng.random() for _ in range(4)]
            total = sum(dist)
            probs = [p / total for p in dist]
            grade = max(range(4), key=lambda g: probs[g])
            usage = Usage(prompt_tokens=rng.randint(200, 900), completion_tokens=40)
            judgment = Judgment(
                query_id=f"Q{i // 100}",
                doc_id=f"D{i}",
                grade=grade,
                status="ok",
                reason=" ".join(rng.choices(reasons, k=rng.randint(12, 30))),
                distribution=probs,
                expected_grade=sum(g * p for g, p in enumerate(probs)),
                judge="openai:gpt-4o-mini",
                prompt=prompt,
                key=key,
                attempts=1,
                usage=usage,
                cost=rng.random() / 1000,
                latency_ms=rng.uniform(200, 900),
            )
            items.append((judgment, fingerprint))
            calls.append(
                CallRecord(
                    key=key,
                    query_id=judgment.query_id,
                    doc_id=judgment.doc_id,
                    judge=judgment.judge,
                    model="gpt-4o-mini",
                    attempt=1,
                    outcome="ok",
                    output_mode="json_schema",
                    latency_ms=judgment.latency_ms or 0.0,
                    usage=usage,
                    http_status=200,
                )
            )
        store.put_many(items, calls)
    store.close()
    return store_bytes(path) / n, bytes_by_table(path, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--pool", type=int, default=100_000, help="passages in the collection")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--llm", type=int, default=20_000, help="LLM judgments for their size")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: reuse the workload and store found there (no first run)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        store = folder / "store.db"
        reuse = args.reuse and args.keep is not None and store.exists()
        t0 = time.perf_counter()
        if reuse:
            queries, docs, run = folder / "queries.tsv", folder / "docs.jsonl", folder / "run.txt"
        else:
            queries, docs, run = write_workload(folder, args.pairs, args.pool, args.seed)
            for name in ("store.db", "store.db-wal", "store.db-shm"):
                (folder / name).unlink(missing_ok=True)
        print(
            f"workload: {args.pairs:,} pairs, pool {args.pool:,} passages, "
            f"{'reused' if reuse else 'written'} in {time.perf_counter() - t0:.1f} s"
        )
        common = [
            "--queries", str(queries), "--docs", str(docs), "--run", str(run),
            "--depth", str(DOCS_PER_QUERY), "--judge", "lexical", "--store", str(store),
            "--quiet",
        ]  # fmt: skip
        outs = ["--out", str(folder / "j.jsonl"), "--qrels-out", str(folder / "llm.qrels")]
        if not reuse:
            first_s, first_mb, first_line = run_grade([*common, *outs])
            print(
                f"first run:        {first_s:8.1f} s  peak {first_mb:7.0f} MB  "
                f"({args.pairs / first_s:,.0f} pairs/s)  {first_line}"
            )
        size = store_bytes(store)
        with sqlite3.connect(store) as conn:
            stored = int(conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])
        rerun_s, rerun_mb, rerun_line = run_grade([*common, *outs])
        print(f"unchanged rerun:  {rerun_s:8.1f} s  peak {rerun_mb:7.0f} MB  {rerun_line}")
        if not rerun_line.split("] ", 1)[-1].startswith("graded 0,"):
            raise SystemExit("the unchanged rerun graded something: " + rerun_line)
        dry_s, dry_mb, dry_line = run_grade([*common, "--dry-run"])
        dry_cpu = dry_line.split("] ", 1)[0] + "]"
        print(f"dry run:          {dry_s:8.1f} s  peak {dry_mb:7.0f} MB  {dry_cpu}")
        per = size / stored
        print(
            f"store:            {size / 1e6:8.1f} MB for {stored:,} judgments: "
            f"{per:,.0f} bytes each (goal <= {BYTES_GOAL:.0f}); by table: "
            + bytes_by_table(store, stored)
        )
        jsonl = (folder / "j.jsonl").stat().st_size
        print(f"judgments JSONL:  {jsonl / 1e6:8.1f} MB")
        llm, llm_tables = llm_bytes_per_judgment(folder, args.llm)
        print(
            f"LLM judgments:    {llm:8,.0f} bytes each with one logged call ({args.llm:,}); "
            f"by table: {llm_tables}"
        )
        print(
            f"goals: rerun {rerun_s:.1f} s <= {RERUN_GOAL_S:g} s: {rerun_s <= RERUN_GOAL_S}; "
            f"dry run {dry_s:.1f} s <= {DRY_RUN_GOAL_S:g} s: {dry_s <= DRY_RUN_GOAL_S}; "
            f"rerun peak {rerun_mb:.0f} MB <= {MEMORY_GOAL_MB:.0f}: {rerun_mb <= MEMORY_GOAL_MB}; "
            f"store {per:.0f} B <= {BYTES_GOAL:.0f}: {per <= BYTES_GOAL}"
        )


if __name__ == "__main__":
    main()
