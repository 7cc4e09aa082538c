"""Where an export's request files stand (answered, partial, untouched), and `relgrade batch
close`: once an export's engine is known dead, each line with no result yet is stored failed
(`Batch:missing`, never a grade), so the next `batch export` asks exactly those again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.batch.files.exports import ExportState
from grader.batch.files.import_files import Importer, JudgeFor
from grader.errors import InputError
from grader.store.store import Store


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


class ExportFiles(ExportState):
    """The export tables read file by file."""

    def file_states(self, export_id: str) -> list[FileState]:
        """Each request file of `export_id` with its lines by outcome, in file order."""
        paths = {file_no: path for file_no, path, *_ in self.files(export_id)}
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


@dataclass(frozen=True)
class CloseSummary:
    """What closing an export did: lines stored as missing, lines whose key was ok by now,
    and the files as they stand after."""

    export_id: str
    missing: int
    already: int
    files: list[FileState]

    @property
    def to_export(self) -> int:
        """Lines of the export with no ok answer: what the next `batch export` asks again."""
        return sum(f.failed for f in self.files)


def close_export(store: Store, judge_for: JudgeFor, export_id: str) -> CloseSummary:
    """Close `export_id` (module docstring): every line that has no result yet is stored
    failed (`Batch:missing`); a line whose key the store holds ok by now is set ok."""
    with ExportFiles(store) as files:
        before = files.file_states(export_id)
    waiting = [f.file_no for f in before if f.waiting]
    with Importer(store, judge_for) as importer:
        summary = importer.close_files(export_id, waiting)
    with ExportFiles(store) as files:
        after = files.file_states(export_id)
    waited = sum(f.waiting for f in before)
    return CloseSummary(export_id, summary.missing, waited - summary.missing, after)
