"""`relgrade batch import`: an inference engine's results files, validated as live replies.

Each results line (`{"id", "custom_id", "response": {"status_code", "request_id", "body"},
"error"}`, the Batch API's and vLLM run-batch's shape) goes through `parse_output_record`: the
one reply validator of live grading (`parse_completion`). An ok reply is stored as the pair's
judgment; an error line, a refused reply, and a request of a touched request file that no line
answered (`missing`) are stored as `failed` with the reason, never as a grade, and can be asked
again live (`reask_failed`). Lines are read and stored in chunks, one transaction each, so a
crash loses at most the chunk in flight and memory does not grow with the file.

- A `custom_id` that is not `relgrade:EXPORT_ID:KEY`, names an export this store did not make,
  or a key its export never asked, stops the import with an InputError naming the file and the
  line, before that chunk is stored (a file from another store, prompt or model).
- Importing the same file twice changes nothing: a key already ok in the store is skipped, and
  so is a failed line whose key already holds a failure.
- A last line cut short (the engine was killed while writing) is reported, not an error; its
  request counts as missing. A malformed line elsewhere is reported with its number.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.batch.collect import LineProblem, failed_judgment, parse_output_record, retry_live
from grader.batch.export_files import LineProgress, Progress
from grader.batch.exports import ExportState, Line, split_custom_id
from grader.errors import InputError
from grader.models import Doc, Judgment, Query
from grader.store.store import Store

CHUNK = 2000  # lines per transaction
SHOW = 5  # examples of bad lines kept for the report

JudgeFor = Callable[[dict[str, Any]], LLMBatchJudge]


@dataclass
class ImportSummary:
    """What an import did, in result lines (one per content key)."""

    files: int = 0
    lines: int = 0
    ok: int = 0
    failed: int = 0
    missing: int = 0
    already: int = 0
    truncated: list[str] = field(default_factory=list)  # "file:line" of cut-short last lines
    malformed: list[str] = field(default_factory=list)  # "file:line" of unreadable lines
    n_malformed: int = 0
    reasked_ok: int = 0
    reasked_failed: int = 0
    exports: set[str] = field(default_factory=set)
    touched: set[tuple[str, int]] = field(default_factory=set)  # (export id, request file)
    problems: dict[str, int] = field(default_factory=dict)  # failure type -> count


def results_files(paths: Sequence[str | Path]) -> list[Path]:
    """The results files named: files as given, folders' `*.jsonl` in name order."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".jsonl")
            if not inside:
                raise InputError("no .jsonl results file in this folder", path=path)
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise InputError("no such results file or folder", path=path)
    return found


@dataclass
class _Record:
    export_id: str
    key: str
    record: dict[str, Any]
    where: str


def _records(path: Path, summary: ImportSummary) -> Iterator[tuple[_Record | None, int]]:
    """(record, bytes read so far) of each line; None for a line that could not be read."""
    read = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            read += len(raw)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                where = f"{path}:{number}"
                if not raw.endswith(b"\n") and fh.peek(1) == b"":
                    summary.truncated.append(where)
                else:
                    summary.n_malformed += 1
                    if len(summary.malformed) < SHOW:
                        summary.malformed.append(where)
                yield None, read
                continue
            ids = split_custom_id(record.get("custom_id"))
            if ids is None:
                raise InputError(
                    f"custom_id {record.get('custom_id')!r} is not one relgrade batch export wrote",
                    path=path,
                    line=number,
                    hint="import the results of `relgrade batch export` request files",
                )
            yield _Record(ids[0], ids[1], record, f"{path.name} line {number}"), read


class Importer:
    """Imports results files into a store (see the module docstring)."""

    def __init__(self, store: Store, judge_for: JudgeFor, *, progress: Progress | None = None):
        self.store = store
        self.judge_for = judge_for
        self.progress = progress
        self.state = ExportState(store)
        self._judges: dict[str, LLMBatchJudge] = {}

    def close(self) -> None:
        self.state.close()

    def __enter__(self) -> Importer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def judge(self, export_id: str, path: Path, line: int | None = None) -> LLMBatchJudge:
        judge = self._judges.get(export_id)
        if judge is None:
            config = self.state.config(export_id)
            if config is None:
                raise InputError(
                    f"these results are of export {export_id}, which this store did not make "
                    f"(another store's export, or one made before this store was replaced)",
                    path=path,
                    line=line,
                    hint="import them with --store pointing at the store that exported them",
                )
            judge = self._judges[export_id] = self.judge_for(config)
        return judge

    def run(self, paths: Sequence[str | Path]) -> ImportSummary:
        """Import every results file, then mark the unanswered requests of the request files
        they touched as failed (`missing`)."""
        files = results_files(paths)
        total = sum(p.stat().st_size for p in files) or 1
        summary = ImportSummary(files=len(files))
        started = time.perf_counter()
        before = 0
        for path in files:
            chunk: list[_Record] = []
            read = 0
            for record, read in _records(path, summary):
                if record is not None:
                    chunk.append(record)
                if len(chunk) >= CHUNK:
                    self._store_chunk(path, chunk, summary)
                    chunk = []
                    self._report(summary, started, (before + read) / total)
            if chunk:
                self._store_chunk(path, chunk, summary)
            before += path.stat().st_size
            self._report(summary, started, before / total)
        self._mark_missing(summary)
        return summary

    def unresolved(self, summary: ImportSummary) -> int:
        """Requests of the touched request files whose result is still a failure."""
        return sum(self.state.count_failed(e, f) for e, f in summary.touched)

    def _report(self, summary: ImportSummary, started: float, fraction: float) -> None:
        if self.progress is not None:
            elapsed = time.perf_counter() - started
            self.progress(LineProgress(summary.lines, None, elapsed, min(1.0, fraction)))

    def _texts(self, lines: Sequence[Line]) -> tuple[dict[str, Query], dict[str, Doc]]:
        queries = self.store.queries({x.query_id for x in lines})
        docs = self.store.docs({x.doc_id for x in lines})
        for x in lines:
            if x.query_id not in queries or x.doc_id not in docs:
                raise InputError(
                    f"the store has no text for ({x.query_id}, {x.doc_id}), exported as {x.key}",
                    path=self.store.path,
                    hint="export again from this store",
                )
        return queries, docs

    def _store_chunk(self, path: Path, chunk: list[_Record], summary: ImportSummary) -> None:
        by_export: dict[str, list[_Record]] = {}
        for rec in chunk:
            by_export.setdefault(rec.export_id, []).append(rec)
        checked: list[tuple[LLMBatchJudge, dict[str, Line], list[_Record]]] = []
        for export_id, records in by_export.items():  # check every line before storing any
            judge = self.judge(export_id, path, _line_of(records[0]))
            lines = self.state.lines(export_id, (r.key for r in records))
            for rec in records:
                if rec.key not in lines:
                    raise InputError(
                        f"{rec.where}: export {export_id} never asked for {rec.key} (results "
                        "of another prompt or model, or an edited file)",
                        path=path,
                        line=_line_of(rec),
                        hint="import only the results of this export's request files",
                    )
            checked.append((judge, lines, records))
        for judge, lines, records in checked:
            self._store_export(judge, lines, records, summary)

    def _store_export(
        self,
        judge: LLMBatchJudge,
        lines: dict[str, Line],
        records: list[_Record],
        summary: ImportSummary,
    ) -> None:
        export_id = records[0].export_id
        summary.exports.add(export_id)
        queries, docs = self._texts(list(lines.values()))
        statuses = self.store.statuses(lines)
        results: dict[str, Judgment] = {}
        outcomes: dict[str, str] = {}
        for rec in records:
            summary.lines += 1
            line = lines[rec.key]
            summary.touched.add((export_id, line.file_no))
            stored = statuses.get(rec.key)
            if stored == "ok" or (rec.key in results and results[rec.key].status == "ok"):
                summary.already += 1
                if line.outcome != "ok":
                    outcomes[rec.key] = "ok"
                continue
            query, doc = queries[line.query_id], docs[line.doc_id]
            outcome = parse_output_record(
                rec.record, query, doc, rec.key, judge.parse_reply, where=rec.where
            )
            if isinstance(outcome, LineProblem):
                if (stored == "failed" and line.outcome == "failed") or rec.key in results:
                    summary.already += 1
                    continue
                outcome = failed_judgment(
                    rec.key, query, doc, outcome, judge_id=judge.judge_id, prompt=judge.prompt_ref
                )
            results[rec.key] = outcome
            outcomes[rec.key] = outcome.status
        self._put(judge, export_id, results, outcomes, summary)

    def _put(
        self,
        judge: LLMBatchJudge,
        export_id: str,
        results: dict[str, Judgment],
        outcomes: dict[str, str],
        summary: ImportSummary,
    ) -> None:
        fingerprint = judge.fingerprint()
        if results:
            self.store.put_many((j, fingerprint) for j in results.values())
        self.state.set_outcomes(export_id, outcomes)  # after the judgments: a crash between
        # leaves outcomes to repair, never an answer lost (the next import sets them)
        for judgment in results.values():
            if judgment.status == "ok":
                summary.ok += 1
            elif judgment.error is not None and judgment.error.type == "Batch:missing":
                summary.missing += 1
            else:
                summary.failed += 1
                kind = judgment.error.type if judgment.error else "failed"
                summary.problems[kind] = summary.problems.get(kind, 0) + 1

    def _mark_missing(self, summary: ImportSummary) -> None:
        """Requests of the request files these results touched that no line answered."""
        for export_id, file_no in sorted(summary.touched):
            judge = self._judges[export_id]
            after = ""
            while lines := self.state.lines_without_outcome(export_id, file_no, after=after):
                after = lines[-1].key
                queries, docs = self._texts(lines)
                statuses = self.store.statuses(x.key for x in lines)
                results: dict[str, Judgment] = {}
                outcomes: dict[str, str] = {}
                for x in lines:
                    status = statuses.get(x.key)
                    if status == "ok":
                        outcomes[x.key] = "ok"
                        continue
                    problem = LineProblem(
                        "Batch:missing",
                        f"no results line for this request of request file {file_no} "
                        f"(export {export_id}); rerun the engine on it, or import with --reask",
                    )
                    results[x.key] = failed_judgment(
                        x.key,
                        queries[x.query_id],
                        docs[x.doc_id],
                        problem,
                        judge_id=judge.judge_id,
                        prompt=judge.prompt_ref,
                    )
                    outcomes[x.key] = "failed"
                self._put(judge, export_id, results, outcomes, summary)

    async def reask_failed(self, summary: ImportSummary, *, concurrency: int = 8) -> None:
        """Ask live every failed request of the request files this import touched (bad,
        refused or missing lines, this import's or an earlier one's), through each export's
        judge; each answer (ok, or failed with its reason) is stored as live grading stores it.
        A fatal JudgeError (the server stopped answering) stops it; what was answered is kept."""
        for export_id, file_no in sorted(summary.touched):
            judge = self._judges[export_id]

            async def live(
                query: Query, doc: Doc, key: str, judge: LLMBatchJudge = judge
            ) -> Judgment:
                return await judge.judge(query, doc, key=key)

            after = ""
            while lines := self.state.failed_lines(export_id, file_no, after=after, limit=500):
                after = lines[-1].key
                queries, docs = self._texts(lines)
                items = {x.key: (queries[x.query_id], docs[x.doc_id]) for x in lines}
                asked = {k: LineProblem("reask", "asked live") for k in items}
                answers = await retry_live(asked, items, live, concurrency=concurrency)
                fingerprint = judge.fingerprint()
                self.store.put_many((j, fingerprint) for j in answers.values())
                self.state.set_outcomes(export_id, {k: j.status for k, j in answers.items()})
                for answer in answers.values():
                    if answer.status == "ok":
                        summary.reasked_ok += 1
                    else:
                        summary.reasked_failed += 1


def _line_of(rec: _Record) -> int | None:
    tail = rec.where.rsplit(" line ", 1)
    return int(tail[1]) if len(tail) == 2 and tail[1].isdigit() else None
