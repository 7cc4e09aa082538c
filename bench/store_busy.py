"""A busy store loses no paid answer: `relgrade grade` on 645 pairs while another connection
holds the store's write lock for 40 s mid-run (issue 11, section 2), at the default thresholds.

    python bench/store_busy.py [--hold 40] [--pairs 645] [--latency-ms 50]

The fake OpenAI-compatible server runs on a thread here and counts the requests (paid); the
lock is taken once a tenth of the pairs are stored. Prints paid, stored and lost (paid - stored,
must be 0), the exit status and what relgrade printed on stderr.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakeserver import FakeServer  # noqa: E402
from tests.grade_data import write_grade_files  # noqa: E402


def stored(store: Path) -> int:
    conn = sqlite3.connect(store, timeout=60)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM judgments WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=40.0, help="seconds the lock is held")
    parser.add_argument("--pairs", type=int, default=645)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-bench"}
    env.pop("OPENAI_BASE_URL", None)
    with FakeServer() as server:
        server.latency_ms = args.latency_ms
        base_url = server.base_url
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            depth = 15
            files = write_grade_files(folder, n_queries=-(-args.pairs // depth), depth=depth)
            store = folder / "s.db"
            command = files.args(
                "--base-url", base_url, "--store", store, "--depth", str(depth), "--quiet"
            )
            command += ["--out", str(folder / "j.jsonl")]
            started = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "grader.cli.main", *command],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            while stored(store) < files.n_pairs // 10 and proc.poll() is None:
                time.sleep(0.05)
            holder = sqlite3.connect(store, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            print(f"lock taken at {time.monotonic() - started:.1f} s, {stored(store)} stored")
            time.sleep(args.hold)
            holder.execute("COMMIT")
            holder.close()
            print(f"lock released at {time.monotonic() - started:.1f} s")
            _, err = proc.communicate()
            paid, kept = server.counts["requests"], stored(store)
            print(f"exit {proc.returncode} after {time.monotonic() - started:.1f} s")
            print(f"pairs {files.n_pairs}  paid {paid}  stored {kept}  lost {paid - kept}")
            print(err.rstrip())
            return 0 if proc.returncode == 0 and paid == kept == files.n_pairs else 1


if __name__ == "__main__":
    raise SystemExit(main())
