"""Batch file exports kept in the store (`grader.store.migrations`): what `batch import`,
`batch status` and `batch close` read."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from grader.batch.beside import TablesBeside
from grader.batch.files.line_ranges import runs_of
from grader.store.writing import now_text

CUSTOM_ID_PREFIX = "relgrade"


def custom_id(export_id: str, key: str) -> str:
    """The `custom_id` of a request line: its export and its content key."""
    return f"{CUSTOM_ID_PREFIX}:{export_id}:{key}"


def split_custom_id(value: object) -> tuple[str, str] | None:
    """(export id, content key) of a `custom_id` written by `custom_id`, else None."""
    if not isinstance(value, str):
        return None
    parts = value.split(":", 2)
    if len(parts) != 3 or parts[0] != CUSTOM_ID_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class Line(NamedTuple):
    """One exported request: key, request file and place there (from 1), id pair, and how its
    result came back (None: not yet). A tuple: an import reads a million."""

    key: str
    file_no: int
    line_no: int
    query_id: str
    doc_id: str
    outcome: str | None


Statements = Sequence[tuple[str, Iterable[Sequence[Any]]]]  # (SQL, rows), run in one transaction

LineRow = tuple[str, int, int, str, str, str]  # export_id, file_no, line_no, key, qid, doc_id


@dataclass(frozen=True)
class ExportInfo:
    """One export and how much of it came back."""

    export_id: str
    judge_config: dict[str, Any]
    out_dir: str
    n_lines: int
    n_pairs: int
    complete: bool
    files: int
    returned_ok: int
    returned_failed: int
    created_at: str

    @property
    def returned(self) -> int:
        return self.returned_ok + self.returned_failed


def _line_statements(export_id: str, lines: Sequence[LineRow], n_pairs: int) -> Statements:
    """Record lines of an export, and count `n_pairs` more id pairs."""
    return [
        (
            "INSERT INTO export_lines (export_id, file_no, line_no, key, query_id, doc_id)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            lines,
        ),
        (
            "UPDATE exports SET n_lines = n_lines + ?, n_pairs = n_pairs + ?, updated_at = ?"
            " WHERE export_id = ?",
            [(len(lines), n_pairs, now_text(), export_id)],
        ),
    ]


class ExportState(TablesBeside):
    """Read and write the export tables of a store."""

    TABLE, WHAT, PRAGMAS = "exports", "export tables", ("synchronous = NORMAL",)

    def set_cache(self, kib: int) -> None:
        self._conn.execute(f"PRAGMA cache_size = -{int(kib)}")

    def set_autocheckpoint(self, pages: int) -> None:
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def _tx(
        self, statements: Statements, before_commit: Callable[[], object] | None = None
    ) -> None:
        with self._transaction() as conn:
            for sql, rows in statements:
                conn.executemany(sql, rows)
            if before_commit is not None:
                before_commit()

    def _one(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """One statement over `rows`, in a transaction of its own."""
        self._tx([(sql, rows)])

    def add_export(self, export_id: str, judge_config: dict[str, Any], out_dir: str) -> None:
        now = now_text()
        config = json.dumps(judge_config, sort_keys=True)
        self._one(
            "INSERT INTO exports (export_id, judge_config, out_dir, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?)",
            [(export_id, config, out_dir, now, now)],
        )

    def add_lines(self, export_id: str, lines: Sequence[LineRow], n_pairs: int) -> None:
        """Record lines (best given in key order: the key index is filled page by page), and
        count `n_pairs` more id pairs."""
        self._tx(_line_statements(export_id, lines, n_pairs))

    def add_file(
        self,
        export_id: str,
        file_no: int,
        path: str,
        lines: int,
        size: int,
        sha256: str,
        *,
        publish: Callable[[], object] | None = None,
        rows: Sequence[LineRow] = (),
        n_pairs: int = 0,
    ) -> None:
        """List a request file with its lines `rows` (and `n_pairs` more id pairs) in one
        transaction; `publish` (its rename to `path`) runs right before the commit."""
        self._tx(
            [
                *(_line_statements(export_id, rows, n_pairs) if rows or n_pairs else []),
                (
                    "INSERT INTO export_files (export_id, file_no, path, lines, bytes, sha256)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(export_id, file_no, path, lines, size, sha256)],
                ),
            ],
            before_commit=publish,
        )

    def drop(self, export_id: str) -> None:
        """Forget an export that could not be written whole."""
        tables = ("export_lines", "export_files", "exports")
        self._tx([(f"DELETE FROM {t} WHERE export_id = ?", [(export_id,)]) for t in tables])

    def finish(self, export_id: str) -> None:
        self._one(
            "UPDATE exports SET complete = 1, updated_at = ? WHERE export_id = ?",
            [(now_text(), export_id)],
        )

    def set_outcomes(self, export_id: str, outcomes: dict[str, str]) -> None:
        """Record how each key's result came back: 'ok' or 'failed'."""
        if outcomes:
            self._one(
                "UPDATE export_lines SET outcome = ? WHERE export_id = ? AND key = ?",
                [(o, export_id, k) for k, o in outcomes.items()],
            )

    def set_outcomes_at(self, export_id: str, places: Iterable[tuple[int, int, str]]) -> None:
        """`set_outcomes` for lines named by place (file, line, outcome), in file order: each
        run of consecutive lines with one outcome is set by one statement."""
        self._one(
            "UPDATE export_lines SET outcome = ? WHERE export_id = ? AND file_no = ?"
            " AND line_no BETWEEN ? AND ?",
            ((o, export_id, f, first, last) for f, first, last, o in runs_of(places)),
        )

    def config(self, export_id: str) -> dict[str, Any] | None:
        """The judge configuration of an export (None: not one of this store's)."""
        row = self._conn.execute(
            "SELECT judge_config FROM exports WHERE export_id = ?", (export_id,)
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def lines(self, export_id: str, keys: Iterable[str]) -> dict[str, Line]:
        """The lines of `export_id` among `keys`, by key."""
        found: dict[str, Line] = {}
        for chunk, marks in _chunks(keys):
            for key, file_no, line_no, qid, did, outcome in self._conn.execute(
                "SELECT key, file_no, line_no, query_id, doc_id, outcome FROM export_lines"
                # by key: without statistics SQLite would scan the export's lines instead
                f" INDEXED BY export_lines_key WHERE export_id = ? AND key IN ({marks})",
                [export_id, *chunk],
            ):
                found[key] = Line(key, file_no, line_no, qid, did, outcome)
        return found

    def lines_in_order(self, export_id: str, keys: Sequence[str]) -> dict[str, Line]:
        """`lines`, faster for keys in request file order (as engines write results): the
        lines after the first key's are read in file order, the others looked up."""
        if not keys:
            return {}
        first = self.lines(export_id, keys[:1])
        line = first.get(keys[0])
        if line is None:
            return self.lines(export_id, keys)
        wanted = set(keys)
        found: dict[str, Line] = {}
        file_no = line.file_no
        for key, line_no, qid, did, outcome in self._conn.execute(
            "SELECT key, line_no, query_id, doc_id, outcome FROM export_lines WHERE export_id = ?"
            " AND file_no = ? AND line_no >= ? ORDER BY line_no LIMIT ?",
            (export_id, file_no, line.line_no, len(keys)),
        ):
            if key in wanted:
                found[key] = Line(key, file_no, line_no, qid, did, outcome)
        if len(found) < len(wanted):
            found.update(self.lines(export_id, (k for k in keys if k not in found)))
        return found

    def lines_with(
        self,
        outcome: str | None,
        export_id: str,
        file_no: int,
        *,
        after: int = 0,
        limit: int = 2000,
    ) -> list[Line]:
        """Lines of one request file with `outcome` (None: no result yet), in file order after
        line `after`."""
        return [
            Line(k, file_no, n, q, d, outcome)
            for n, k, q, d in self._conn.execute(
                "SELECT line_no, key, query_id, doc_id FROM export_lines WHERE export_id = ?"
                " AND file_no = ? AND line_no > ? AND outcome IS ? ORDER BY line_no LIMIT ?",
                (export_id, file_no, after, outcome, limit),
            )
        ]

    def exports_waiting(self, export_id: str) -> list[str]:
        """The other exports with a line no result has come back for yet, oldest first."""
        return [
            other
            for (other,) in self._conn.execute(
                "SELECT e.export_id FROM exports e WHERE e.export_id != ? AND EXISTS"
                " (SELECT 1 FROM export_lines l WHERE l.export_id = e.export_id"
                " AND l.outcome IS NULL) ORDER BY e.created_at",
                (export_id,),
            )
        ]

    def keys_waiting(self, exports: Sequence[str], keys: Iterable[str]) -> dict[str, str]:
        """Those of `keys` a line of one of `exports` asks with no result yet, with the first
        such export."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        for other in exports:
            for chunk, marks in _chunks(unique):
                found.update(
                    (key, other)
                    for (key,) in self._conn.execute(
                        "SELECT key FROM export_lines INDEXED BY export_lines_key"
                        f" WHERE export_id = ? AND key IN ({marks}) AND outcome IS NULL",
                        [other, *chunk],
                    )
                    if key not in found
                )
        return found

    def waiting_elsewhere(self, export_id: str) -> dict[str, int]:
        """How many of `export_id`'s lines each other export also asks with no result yet
        (paid twice if both are run), by export."""
        others = self.exports_waiting(export_id)  # (an export imported whole is passed over)
        found: dict[str, int] = {}
        for other in others:
            (count,) = self._conn.execute(
                # CROSS JOIN: SQLite keeps this export's lines as the outer loop
                "SELECT COUNT(*) FROM export_lines a CROSS JOIN export_lines b INDEXED BY"
                " export_lines_key WHERE b.export_id = ? AND b.key = a.key"
                " AND a.export_id = ? AND b.outcome IS NULL",
                (other, export_id),
            ).fetchone()
            if count:
                found[other] = int(count)
        return found

    def files(self, export_id: str) -> list[tuple[int, str, int, int, str]]:
        """(file_no, path, lines, bytes, sha256) of each request file of an export."""
        return list(
            self._conn.execute(
                "SELECT file_no, path, lines, bytes, sha256 FROM export_files"
                " WHERE export_id = ? ORDER BY file_no",
                (export_id,),
            )
        )

    def exports(self) -> list[ExportInfo]:
        """Every export, oldest first, with how many lines came back."""
        rows = self._conn.execute(
            "SELECT e.export_id, e.judge_config, e.out_dir, e.n_lines, e.n_pairs, e.complete,"
            " (SELECT COUNT(*) FROM export_files f WHERE f.export_id = e.export_id),"
            " (SELECT COUNT(*) FROM export_lines l WHERE l.export_id = e.export_id"
            "  AND l.outcome = 'ok'),"
            " (SELECT COUNT(*) FROM export_lines l WHERE l.export_id = e.export_id"
            "  AND l.outcome = 'failed'),"
            " e.created_at FROM exports e ORDER BY e.created_at, e.export_id"
        ).fetchall()
        return [
            ExportInfo(r[0], json.loads(r[1]), r[2], r[3], r[4], bool(r[5]), *r[6:]) for r in rows
        ]


def _chunks(keys: Iterable[str], size: int = 500) -> Iterator[tuple[list[str], str]]:
    """The distinct `keys` in chunks, each with its `?` marks for `IN (...)`."""
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), size):
        chunk = unique[start : start + size]
        yield chunk, ",".join("?" * len(chunk))
