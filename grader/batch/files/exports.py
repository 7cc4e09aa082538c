"""Batch file exports kept in the store (`grader.store.migrations`): what `batch import`,
`batch status` and `batch close` read, and where each request file stands (`FileState`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from grader.batch.beside import TablesBeside
from grader.errors import InputError
from grader.store.writing import now_text

CUSTOM_ID_PREFIX = "relgrade"
T = TypeVar("T")


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


@dataclass(frozen=True)
class FileState:
    """One request file of an export: its lines, how many came back ok or failed, and how
    many wait (no result yet); `path` None: lines recorded for a file never listed."""

    export_id: str
    file_no: int
    path: str | None
    lines: int
    ok: int
    failed: int
    waiting: int

    @property
    def state(self) -> str:
        """answered | partial | untouched (module docstring)."""
        if self.waiting == 0:
            return "answered"
        return "untouched" if self.waiting == self.lines else "partial"


class ExportState(TablesBeside):
    """Read and write the export tables of a store."""

    TABLE, WHAT, PRAGMAS = "exports", "export tables", ("synchronous = NORMAL",)
    LINES, OWNER = "export_lines", "export_id"

    def set_cache(self, kib: int) -> None:
        self._conn.execute(f"PRAGMA cache_size = -{int(kib)}")

    def set_autocheckpoint(self, pages: int) -> None:
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def add_export(self, export_id: str, judge_config: dict[str, Any], out_dir: str) -> None:
        now = now_text()
        config = json.dumps(judge_config, sort_keys=True)
        self._one(
            "INSERT INTO exports (export_id, judge_config, out_dir, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?)",
            [(export_id, config, out_dir, now, now)],
        )

    def add_lines(
        self,
        export_id: str,
        lines: Sequence[LineRow],
        n_pairs: int,
        file: tuple[int, str, int, int, str] | None = None,
        publish: Callable[[], object] | None = None,
    ) -> None:
        """Record lines (best in key order: the key index is filled page by page), count
        `n_pairs` more id pairs, and list request `file` (file_no, path, lines, bytes, sha256) in
        one transaction; `publish` (its rename to that path) runs right before the commit."""
        statements: list[tuple[str, Iterable[Sequence[Any]]]] = [
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
        if file is not None:
            statements.append(
                (
                    "INSERT INTO export_files (export_id, file_no, path, lines, bytes, sha256)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(export_id, *file)],
                )
            )
        self._tx(statements, before_commit=publish)

    def drop(self, export_id: str) -> None:
        """Forget an export that could not be written whole."""
        tables = ("export_lines", "export_files", "exports")
        self._tx([(f"DELETE FROM {t} WHERE export_id = ?", [(export_id,)]) for t in tables])

    def finish(self, export_id: str) -> None:
        self._one(
            "UPDATE exports SET complete = 1, updated_at = ? WHERE export_id = ?",
            [(now_text(), export_id)],
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
        for chunk in batches(dict.fromkeys(keys), 500):
            marks = ",".join("?" * len(chunk))
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
            lines = self.lines(other, unique).values()
            found.update((x.key, other) for x in lines if x.outcome is None and x.key not in found)
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

    def unlisted(self, export_id: str, file_no: int) -> bool:
        """Whether request file `file_no` of `export_id`, an export of this store, is not listed."""
        listed = self._conn.execute(
            "SELECT 1 FROM export_files WHERE export_id = ? AND file_no = ?", (export_id, file_no)
        ).fetchone()
        return listed is None and self.config(export_id) is not None

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

    def file_states(self, export_id: str) -> list[FileState]:
        """Each request file of `export_id` with its lines by outcome, in file order."""
        paths = dict(
            self._conn.execute(
                "SELECT file_no, path FROM export_files WHERE export_id = ?", (export_id,)
            )
        )
        rows = self._conn.execute(
            "SELECT file_no, COUNT(*), COUNT(CASE WHEN outcome = 'ok' THEN 1 END),"
            " COUNT(CASE WHEN outcome = 'failed' THEN 1 END) FROM export_lines"
            " WHERE export_id = ? GROUP BY file_no ORDER BY file_no",
            (export_id,),
        ).fetchall()
        return [
            FileState(export_id, f, paths.get(f), n, ok, failed, n - ok - failed)
            for f, n, ok, failed in rows
        ]

    def resolve(self, given: str) -> list[str]:
        """The exports `given` names: an export id (or a prefix of one only it has), one of its
        request files, or the folder it wrote into (its exports, oldest first)."""
        ids = [e.export_id for e in self.exports()]
        if given in ids:
            return [given]
        path = Path(given)
        if path.is_dir():
            folder = str(path.resolve())
            found = [e.export_id for e in self.exports() if e.out_dir == folder]
            if found:
                return found
        for export_id in ids:
            if path.name.startswith(f"requests-{export_id}-"):
                return [export_id]
        prefixed = [i for i in ids if i.startswith(given)] if len(given) >= 4 else []
        if len(prefixed) == 1:
            return prefixed
        raise InputError(
            f"{given!r} names no export of this store"
            + (f" (it starts {len(prefixed)} export ids)" if prefixed else ""),
            hint="give an export id, one of its request files or its folder; "
            "`relgrade batch status --exports` lists them",
        )


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of `size` (the last shorter)."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def runs_of(places: Iterable[tuple[int, int, str]]) -> Iterator[tuple[int, int, int, str]]:
    """(file, first line, last line, outcome) of each run of consecutive lines of one file
    with one outcome, for `places` (file, line, outcome) in file order."""
    run: list[Any] | None = None
    for file_no, line_no, outcome in places:
        if run is not None and run[0] == file_no and run[2] + 1 == line_no and run[3] == outcome:
            run[2] = line_no
            continue
        if run is not None:
            yield run[0], run[1], run[2], run[3]
        run = [file_no, line_no, line_no, outcome]
    if run is not None:
        yield run[0], run[1], run[2], run[3]
