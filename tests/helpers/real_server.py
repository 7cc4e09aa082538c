"""Helpers of the `real_server` tests: where the server is, the example files, and the small
engine that answers `relgrade batch export` request files through the server's live endpoint,
writing OpenAI batch output lines (what a Batch API or vLLM's `run_batch` would write)."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import httpx2

URL_ENV = "RELGRADE_REAL_SERVER_URL"
"""The base URL (`http://127.0.0.1:PORT/v1`) of the real server `.ci/run` starts."""
MODEL_ENV = "RELGRADE_REAL_SERVER_MODEL"
"""The model id to ask for (default: the first that its /v1/models lists)."""
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "passages"
DEPTH = "3"  # 4 queries x 3 results: a dozen pairs
TIMEOUT = "900"
"""Seconds per request: generous, for a busy 2-core machine where the server queues requests and
one reply may take minutes; a request the server does not answer at all still ends."""


@dataclass(frozen=True)
class Server:
    url: str
    model: str


def real_server() -> Server | None:
    """The real server named by the environment, or None (the tests then skip)."""
    url = os.environ.get(URL_ENV)
    if not url:
        return None
    model = os.environ.get(MODEL_ENV)
    if not model:
        listed = httpx2.get(url.rstrip("/") + "/models", timeout=30).json()
        model = str(listed["data"][0]["id"])
    return Server(url.rstrip("/"), model)


def grade_args(server: Server, folder: Path, *extra: str, depth: str = DEPTH) -> list[str]:
    """`relgrade grade` of the examples' top `depth` per query through the server."""
    return [
        "grade",
        "--queries",
        str(EXAMPLES / "queries.tsv"),
        "--docs",
        str(EXAMPLES / "docs.tsv"),
        "--run",
        str(EXAMPLES / "run.txt"),
        "--depth",
        depth,
        "--base-url",
        server.url,
        "--model",
        server.model,
        "--concurrency",
        "2",
        "--timeout",
        TIMEOUT,
        "--quiet",
        *extra,
    ]


def calls_logged(db: Path) -> int:
    """Rows of the store's call log (one per HTTP attempt)."""
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM calls").fetchone()[0])


def keys_called_after(db: Path, logged: int) -> set[str]:
    """The content keys of the calls logged after the first `logged` rows of the call log."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT key FROM calls ORDER BY id LIMIT -1 OFFSET ?", (logged,))
        return {str(key) for (key,) in rows}


def keys_without_grade(db: Path) -> set[str]:
    """The content keys the store holds as failed (no grade): a rerun asks for these again."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT key FROM judgment_rows WHERE status != 'ok'")
        return {str(key) for (key,) in rows}


def answer_batch(server: Server, requests_dir: Path, out: Path) -> int:
    """Post each request line's body in `requests_dir` to the server; write one OpenAI batch
    output line per request to `out`; the lines written."""
    lines = 0
    with httpx2.Client(timeout=float(TIMEOUT)) as client, out.open("w", encoding="utf-8") as sink:
        for path in sorted(requests_dir.glob("*.jsonl")):
            for raw in path.read_text(encoding="utf-8").splitlines():
                request = json.loads(raw)
                reply = client.post(server.url + "/chat/completions", json=request["body"])
                record = {
                    "id": f"batch_req_{lines}",
                    "custom_id": request["custom_id"],
                    "response": {
                        "status_code": reply.status_code,
                        "request_id": f"req_{lines}",
                        "body": reply.json(),
                    },
                    "error": None,
                }
                sink.write(json.dumps(record) + "\n")
                lines += 1
    return lines
