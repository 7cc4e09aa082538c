"""Batch API jobs kept in the store (`grader.store.migrations`), one transaction per phase
change, so `batch status|collect` or a rerun can continue them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from grader.batch.api.client import BatchInfo
from grader.batch.beside import TablesBeside
from grader.errors import StoreError
from grader.store.writing import now_text


class Item(NamedTuple):
    """One request of a job: the content key and the pair it grades."""

    key: str
    query_id: str
    doc_id: str


@dataclass(frozen=True)
class Job:
    """One input file / batch and how far it got."""

    job_id: int
    phase: str
    batch_id: str | None
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    remote_status: str | None
    judge_config: dict[str, Any]
    n_requests: int
    n_completed: int
    n_failed: int
    created_at: str
    updated_at: str
    base_url: str | None = None  # where it was sent (None: a job from before it was stored)


def public_base_url(url: str) -> str:
    """`url` without user, password, query or fragment: what may be stored and printed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class BatchState(TablesBeside):
    """Read and write the batch tables of a store."""

    TABLE, WHAT, LINES, OWNER = "batch_jobs", "batch tables", "batch_items", "job_id"

    def add_job(
        self, judge_config: dict[str, Any], items: Sequence[Item], *, base_url: str | None = None
    ) -> int:
        """Record a new job in phase `prepared` with its items and the endpoint it goes to
        (`base_url`, stored without credentials: `public_base_url`); returns the job id."""
        now = now_text()
        url = public_base_url(base_url) if base_url else None
        config = json.dumps(judge_config, sort_keys=True)
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO batch_jobs (phase, judge_config, n_requests, created_at, updated_at,"
                " base_url) VALUES ('prepared', ?, ?, ?, ?, ?)",
                (config, len({i.key for i in items}), now, now, url),
            )
            job_id = int(cursor.lastrowid or 0)
            conn.executemany(
                "INSERT OR IGNORE INTO batch_items (job_id, key, query_id, doc_id)"
                " VALUES (?, ?, ?, ?)",
                ((job_id, i.key, i.query_id, i.doc_id) for i in items),
            )
        return job_id

    def _set(self, job_id: int, columns: str, *values: object) -> None:
        """Set one job's `columns` ("a = ?, ...") to `values`, and its `updated_at`."""
        self._conn.execute(
            f"UPDATE batch_jobs SET {columns}, updated_at = ? WHERE job_id = ?",
            (*values, now_text(), job_id),
        )

    def set_uploaded(self, job_id: int, input_file_id: str) -> None:
        self._set(job_id, "phase = 'uploaded', input_file_id = ?", input_file_id)

    def set_remote(self, job_id: int, info: BatchInfo) -> None:
        """Record the batch's id and latest status (moves a job to `submitted`)."""
        files = (info.input_file_id, info.output_file_id, info.error_file_id)
        self._set(
            job_id,
            "phase = CASE WHEN phase = 'collected' THEN phase ELSE 'submitted' END, batch_id = ?,"
            " input_file_id = ?, output_file_id = ?, error_file_id = ?, remote_status = ?,"
            " n_completed = ?, n_failed = ?",
            *(info.id, *files, info.status, info.completed, info.failed),
        )

    def drop_prepared(self, job_id: int) -> bool:
        """Forget a job that never reached the server (its upload was refused); True if gone."""
        with self._transaction() as conn:
            gone = conn.execute(
                "DELETE FROM batch_jobs WHERE job_id = ? AND phase = 'prepared'", (job_id,)
            ).rowcount
            if gone:
                conn.execute("DELETE FROM batch_items WHERE job_id = ?", (job_id,))
        return bool(gone)

    def set_collected(self, job_id: int) -> None:
        self._set(job_id, "phase = 'collected'")

    def jobs(self, *, open_only: bool = False) -> list[Job]:
        """All jobs (or those not yet collected), oldest first."""
        sql = f"SELECT {', '.join(f.name for f in fields(Job))} FROM batch_jobs"
        if open_only:
            sql += " WHERE phase != 'collected'"
        sql += " ORDER BY job_id"
        rows: list[list[Any]] = [list(row) for row in self._conn.execute(sql)]
        for row in rows:
            row[7] = json.loads(row[7])  # judge_config
        return [Job(*row) for row in rows]

    def job(self, job_id: int) -> Job:
        for job in self.jobs():
            if job.job_id == job_id:
                return job
        raise StoreError(f"{self.path}: no batch job {job_id}")

    def items(self, job_id: int) -> list[Item]:
        """The items of one job, in the order they were recorded."""
        sql = "SELECT key, query_id, doc_id FROM batch_items WHERE job_id = ? ORDER BY rowid"
        return [Item(*row) for row in self._conn.execute(sql, (job_id,))]

    def open_keys(self) -> set[str]:
        """Keys waiting in jobs not yet collected (never send them again meanwhile)."""
        return {
            k
            for (k,) in self._conn.execute(
                "SELECT DISTINCT i.key FROM batch_items i JOIN batch_jobs j USING (job_id)"
                " WHERE j.phase != 'collected'"
            )
        }

    def keys_with_outcome(self, outcome: str) -> set[str]:
        """Keys whose latest job ended with `outcome` ('batch' = graded at the batch price)."""
        sql = "SELECT DISTINCT key FROM batch_items WHERE outcome = ?"
        return {k for (k,) in self._conn.execute(sql, (outcome,))}
