"""Batch jobs kept in the store (tables from `grader.store.batch_tables`), so any later process
can see and continue them: `relgrade batch status`, `relgrade batch collect`, or rerunning regrade.

Uses its own SQLite connection to the store file (WAL lets it sit beside the Store's); every phase
change is one committed transaction, written right after the server call it records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from grader.batch.api.client import BatchInfo
from grader.errors import StoreError
from grader.store.connection_beside import connect_beside, now_iso
from grader.store.disk_full import roll_back
from grader.store.store import Store

PHASES = ("prepared", "uploaded", "submitted", "collected")


@dataclass(frozen=True)
class Item:
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
    base_url: str | None = None
    """The endpoint the job was sent to (None: a job from before relgrade stored it)."""


def public_base_url(url: str) -> str:
    """`url` without user, password, query or fragment: what may be stored and printed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class BatchState:
    """Read and write the batch tables of a store."""

    def __init__(self, store: Store) -> None:
        self.path = store.path
        self._conn = connect_beside(self.path, "batch_jobs", "batch tables")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> BatchState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: Sequence[Any]) -> int:
        cursor = self._conn.execute(sql, params)
        return cursor.rowcount

    # ---- writing -------------------------------------------------------------------------

    def add_job(
        self, judge_config: dict[str, Any], items: Sequence[Item], *, base_url: str | None = None
    ) -> int:
        """Record a new job in phase `prepared` with its items and the endpoint it goes to
        (`base_url`, stored without credentials: `public_base_url`); returns the job id."""
        now = now_iso()
        url = public_base_url(base_url) if base_url else None
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._conn.execute(
                "INSERT INTO batch_jobs (phase, judge_config, n_requests, created_at, updated_at,"
                " base_url) VALUES ('prepared', ?, ?, ?, ?, ?)",
                (
                    json.dumps(judge_config, sort_keys=True),
                    len({i.key for i in items}),
                    now,
                    now,
                    url,
                ),
            )
            job_id = int(cursor.lastrowid or 0)
            self._conn.executemany(
                "INSERT OR IGNORE INTO batch_items (job_id, key, query_id, doc_id)"
                " VALUES (?, ?, ?, ?)",
                ((job_id, i.key, i.query_id, i.doc_id) for i in items),
            )
            self._conn.execute("COMMIT")
        except BaseException as exc:
            roll_back(self._conn, exc, self.path, "recording a batch job")
            raise
        return job_id

    def set_uploaded(self, job_id: int, input_file_id: str) -> None:
        self._write(
            "UPDATE batch_jobs SET phase = 'uploaded', input_file_id = ?, updated_at = ?"
            " WHERE job_id = ?",
            (input_file_id, now_iso(), job_id),
        )

    def set_remote(self, job_id: int, info: BatchInfo) -> None:
        """Record the batch's id and latest status (moves a job to `submitted`)."""
        self._write(
            "UPDATE batch_jobs SET phase = CASE WHEN phase = 'collected' THEN phase"
            " ELSE 'submitted' END, batch_id = ?, input_file_id = ?, output_file_id = ?,"
            " error_file_id = ?, remote_status = ?, n_completed = ?, n_failed = ?,"
            " updated_at = ? WHERE job_id = ?",
            (
                info.id,
                info.input_file_id,
                info.output_file_id,
                info.error_file_id,
                info.status,
                info.completed,
                info.failed,
                now_iso(),
                job_id,
            ),
        )

    def set_outcomes(self, job_id: int, outcomes: dict[str, str]) -> None:
        """Record how each key of a job ended: 'batch', 'live' or 'failed'."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.executemany(
                "UPDATE batch_items SET outcome = ? WHERE job_id = ? AND key = ?",
                ((outcome, job_id, key) for key, outcome in outcomes.items()),
            )
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def drop_prepared(self, job_id: int) -> bool:
        """Forget a job that never reached the server (its upload was refused); True if gone."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            gone = self._conn.execute(
                "DELETE FROM batch_jobs WHERE job_id = ? AND phase = 'prepared'", (job_id,)
            ).rowcount
            if gone:
                self._conn.execute("DELETE FROM batch_items WHERE job_id = ?", (job_id,))
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return bool(gone)

    def set_collected(self, job_id: int) -> None:
        self._write(
            "UPDATE batch_jobs SET phase = 'collected', updated_at = ? WHERE job_id = ?",
            (now_iso(), job_id),
        )

    # ---- reading -------------------------------------------------------------------------

    def jobs(self, *, open_only: bool = False) -> list[Job]:
        """All jobs (or those not yet collected), oldest first."""
        sql = (
            "SELECT job_id, phase, batch_id, input_file_id, output_file_id, error_file_id,"
            " remote_status, judge_config, n_requests, n_completed, n_failed, created_at,"
            " updated_at, base_url FROM batch_jobs"
        )
        if open_only:
            sql += " WHERE phase != 'collected'"
        sql += " ORDER BY job_id"
        return [
            Job(
                job_id=row[0],
                phase=row[1],
                batch_id=row[2],
                input_file_id=row[3],
                output_file_id=row[4],
                error_file_id=row[5],
                remote_status=row[6],
                judge_config=json.loads(row[7]),
                n_requests=row[8],
                n_completed=row[9],
                n_failed=row[10],
                created_at=row[11],
                updated_at=row[12],
                base_url=row[13],
            )
            for row in self._conn.execute(sql)
        ]

    def job(self, job_id: int) -> Job:
        for job in self.jobs():
            if job.job_id == job_id:
                return job
        raise StoreError(f"{self.path}: no batch job {job_id}")

    def items(self, job_id: int) -> list[Item]:
        """The items of one job, in the order they were recorded."""
        return [
            Item(key=k, query_id=q, doc_id=d)
            for k, q, d in self._conn.execute(
                "SELECT key, query_id, doc_id FROM batch_items WHERE job_id = ? ORDER BY rowid",
                (job_id,),
            )
        ]

    def open_keys(self) -> set[str]:
        """Keys waiting in jobs not yet collected (never send them again meanwhile)."""
        return {
            k
            for (k,) in self._conn.execute(
                "SELECT DISTINCT i.key FROM batch_items i JOIN batch_jobs j USING (job_id)"
                " WHERE j.phase != 'collected'"
            )
        }

    def keys_with_outcome(self, outcome: str, keys: Iterable[str] | None = None) -> set[str]:
        """Keys whose latest job ended with `outcome` ('batch' = graded at the batch price)."""
        found = {
            k
            for (k,) in self._conn.execute(
                "SELECT DISTINCT key FROM batch_items WHERE outcome = ?", (outcome,)
            )
        }
        return found if keys is None else found & set(keys)
