"""One byte range of a results file decoded, checked and validated: the part of `batch import`
that runs in worker processes. Judgments come back as the rows the store writes; nothing is
written here. An export with no reader yet comes back as `RangeResult.need_export` (the writer
builds its judge and sends the range again)."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from grader.batch.adapter import BatchReplies, ResultLine, loads, loads_line
from grader.batch.collect import (
    LineProblem,
    answered_body,
    failed_judgment,
    other_model,
    pair_texts,
    parse_output_record,
)
from grader.batch.files.exports import ExportState, Line, split_custom_id
from grader.errors import InputError
from grader.models import Judgment
from grader.prompts import is_text_truncated
from grader.store.judgment_rows import StoredRow
from grader.store.store import Store

SHOW = 5  # examples of bad lines kept for the report
GROUP = 500  # lines looked up and validated together


@dataclass(frozen=True)
class RangeTask:
    """Bytes `start`..`end` (whole lines, the first numbered `first_line`) of results file
    `path`, read with these exports' readers."""

    path: str
    start: int
    end: int
    first_line: int
    at_eof: bool
    readers: dict[str, BatchReplies]


class Answer(NamedTuple):
    """One results line: key, export, place (file, line), the key's stored status and line
    outcome as read, and the judgment's status, error type and row (None: stored ok already)."""

    key: str
    export_id: str
    file_no: int
    line_no: int
    stored: str | None
    outcome: str | None
    status: str | None
    error_type: str | None
    row: StoredRow | None

    @classmethod
    def of(
        cls,
        line: Line,
        export_id: str,
        stored: str | None,
        status: str | None = None,
        error_type: str | None = None,
        row: StoredRow | None = None,
    ) -> Answer:
        key, file_no, line_no, _, _, outcome = line
        return cls(key, export_id, file_no, line_no, stored, outcome, status, error_type, row)


@dataclass
class RangeResult:
    """What one range gave: an answer per line (in file order), the lines cut short or
    unreadable, or the export it needs a reader for."""

    answers: list[Answer] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    n_malformed: int = 0
    need_export: tuple[str, int] | None = None  # (export id, the line that names it)


class _Record(NamedTuple):
    """A results line: export, key, JSON (structs from `loads_line`, or a dict), number, bytes."""

    export_id: str
    key: str
    record: ResultLine | dict[str, Any]
    line: int
    raw: bytes


class RangeReader:
    """Reads ranges against one store (its own connections in a worker process)."""

    def __init__(self, store: Store, state: ExportState) -> None:
        self.store = store
        self.state = state

    def read(self, task: RangeTask) -> RangeResult:
        """What one range gives (an InputError, from a worker too, stops the import)."""
        result = RangeResult()
        group: list[_Record] = []
        for rec in self._records(task, result):
            if rec.export_id not in task.readers:
                return RangeResult(need_export=(rec.export_id, rec.line))
            group.append(rec)
            if len(group) >= GROUP:
                self._group(task, group, result)
                group = []
        self._group(task, group, result)
        return result

    def _group(self, task: RangeTask, group: list[_Record], result: RangeResult) -> None:
        """Look up and validate a few hundred lines together."""
        by_export: dict[str, list[_Record]] = {}
        for rec in group:
            by_export.setdefault(rec.export_id, []).append(rec)
        answers: dict[int, Answer] = {}
        for export_id, recs in by_export.items():
            self._answer(task, task.readers[export_id], export_id, recs, answers)
        result.answers.extend(answers[rec.line] for rec in group)

    def _records(self, task: RangeTask, result: RangeResult) -> Iterator[_Record]:
        with open(task.path, "rb") as fh:
            fh.seek(task.start)
            data = fh.read(task.end - task.start)
        # lines found by `find` (memchr), faster than `split`
        find, size = data.find, len(data)
        start, number = 0, task.first_line - 1
        while start < size:
            end = find(b"\n", start)
            last = end < 0  # a line after the last newline: cut short if the file ends so
            if last:
                end = size
            raw = data[start:end]
            start = end + 1
            number += 1
            if not raw or raw.isspace():
                continue
            record: ResultLine | dict[str, Any] | None = loads_line(raw)  # (nearly every line)
            if record is None:  # the rest are decoded whole
                try:
                    record = loads(raw)
                except ValueError:
                    record = None
            if not (type(record) is ResultLine or isinstance(record, dict)):
                where = f"{task.path}:{number}"
                if last and task.at_eof:
                    result.truncated.append(where)
                else:
                    result.n_malformed += 1
                    if len(result.malformed) < SHOW:
                        result.malformed.append(where)
                continue
            custom_id = (
                record.custom_id if isinstance(record, ResultLine) else record.get("custom_id")
            )
            ids = split_custom_id(custom_id)
            if ids is None:
                raise InputError(
                    f"custom_id {custom_id!r} is not one relgrade batch export wrote",
                    path=task.path,
                    line=number,
                    hint="import the results of `relgrade batch export` request files",
                )
            yield _Record(ids[0], ids[1], record, number, raw)

    def _answer(
        self,
        task: RangeTask,
        replies: BatchReplies,
        export_id: str,
        records: list[_Record],
        answers: dict[int, Answer],
    ) -> None:
        lines = self.state.lines_in_order(export_id, [r.key for r in records])
        name = Path(task.path).name
        for rec in records:
            if rec.key not in lines:
                raise InputError(
                    f"{name} line {rec.line}: export {export_id} never asked for {rec.key} "
                    "(results of another prompt or model, or an edited file)",
                    path=task.path,
                    line=rec.line,
                    hint="import only the results of this export's request files",
                )
        cut = self._docs_cut(replies, lines.values())
        statuses = self.store.statuses(lines)
        model = replies.fingerprint.get("model")
        now = datetime.now(UTC)  # the time of the group's judgments
        rest: list[tuple[_Record, Line, str | None, str | None]] = []
        for rec in records:
            _, key, record, number, _ = rec  # (unpacked at once: fields are looked up)
            line = lines[key]
            stored = statuses.get(key)
            if stored == "ok":  # final: nothing to read but whether it was paid again
                paid = "ok" if _answered(record) else None
                answers[number] = Answer.of(line, export_id, stored, paid)
                continue
            other = None
            if isinstance(record, ResultLine):  # structs: a reply live grading accepts, or None
                reply = replies.line_reply(record)
                if reply is None:  # read as a dict, which words what is wrong
                    record = loads(rec.raw)
                    rec = rec._replace(record=record)  # (not decoded again below)
            if not isinstance(record, ResultLine):
                other = other_model(record, model)
                body = answered_body(record) if other is None else None
                reply = replies.valid_reply(body) if body is not None else None
            if reply is not None:  # a valid reply (nearly every line): its row made at once
                _, _, _, query_id, doc_id, _ = line
                row = replies.ok_row(
                    self.store, reply, query_id, doc_id, cut[doc_id], key, created_at=now
                )
                answers[number] = Answer.of(line, export_id, stored, "ok", None, row)
                continue
            rest.append((rec, line, stored, other))
        if rest:
            self._judge_rest(name, replies, export_id, model, rest, answers)

    def _docs_cut(self, replies: BatchReplies, lines: Iterable[Line]) -> dict[str, bool]:
        """Whether each of these lines' documents is cut for the prompt (only texts longer than
        the prompt keeps are read); InputError for a pair without texts (`pair_texts`)."""
        lines = list(lines)
        queries = self.store.query_ids({x.query_id for x in lines})
        prompt = replies.reader.prompt
        docs = self.store.long_doc_texts({x.doc_id for x in lines}, prompt.doc_budget_chars)
        for x in lines:
            if x.query_id not in queries or x.doc_id not in docs:
                pair_texts(self.store, [x], whole=False)  # raises, naming the pair
        return {d: t is not None and is_text_truncated(prompt, t) for d, t in docs.items()}

    def _judge_rest(
        self,
        name: str,
        replies: BatchReplies,
        export_id: str,
        model: object,
        rest: list[tuple[_Record, Line, str | None, str | None]],
        answers: dict[int, Answer],
    ) -> None:
        """Judgments of the lines that are not a valid reply (an error line, a refused reply,
        another model's), made as live grading makes them."""
        queries, docs = pair_texts(self.store, [line for _, line, _, _ in rest], whole=False)
        judged: list[tuple[_Record, Line, str | None, Judgment]] = []
        for rec, line, stored, other in rest:
            query, doc = queries[line.query_id], docs[line.doc_id]
            where = f"{name} line {rec.line}"
            outcome: Judgment | LineProblem
            if other is not None:  # never stored as the exported model's grade
                outcome = LineProblem(
                    "ModelMismatch",
                    f"{where}: answered by model {other!r}, but the export asked {model!r}; run"
                    f" the engine with that model, or export again with --model {other}",
                )
            else:  # (words an error from all of the line)
                whole = rec.record if isinstance(rec.record, dict) else loads(rec.raw)
                outcome = parse_output_record(
                    whole, query, doc, rec.key, replies.parse_reply, where=where
                )
            if isinstance(outcome, LineProblem):
                outcome = failed_judgment(
                    rec.key,
                    query,
                    doc,
                    outcome,
                    judge_id=replies.judge_id,
                    prompt=replies.prompt_ref,
                )
            judged.append((rec, line, stored, outcome))
        rows = self.store.stored_rows((j, replies.fingerprint) for _, _, _, j in judged)
        for (rec, line, stored, judgment), row in zip(judged, rows, strict=True):
            error = judgment.error.type if judgment.error else None
            answers[rec.line] = Answer.of(line, export_id, stored, judgment.status, error, row)


def line_ranges(path: Path, block: int) -> Iterator[tuple[int, int, int, bool]]:
    """(start, end, first line number, ends the file) of ranges of whole lines of about
    `block` bytes (a line longer than that is a range of its own)."""
    size = path.stat().st_size
    start, line = 0, 1
    with path.open("rb") as fh:
        while start < size:
            fh.seek(start)
            data = fh.read(block)
            end = start + len(data)
            whole = len(data)  # bytes of `data` that are whole lines
            while end < size and not data.endswith(b"\n"):
                cut = data.rfind(b"\n")
                if cut >= 0:
                    whole = cut + 1  # counted in place: a slice would copy ~4 MB
                    end = start + whole
                    break
                more = fh.read(block)  # no newline yet: one long line
                data += more
                end += len(more)
                whole = len(data)
            yield start, end, line, end >= size
            line += count_newlines(data, whole)
            start = end


def count_newlines(data: bytes, end: int) -> int:
    """`data.count(b"\n", 0, end)`, found by `find` (memchr): `count` of one byte goes
    through the bytes one at a time."""
    count, find = 0, data.find
    at = find(b"\n", 0, end)
    while at >= 0:
        count += 1
        at = find(b"\n", at + 1, end)
    return count


def _answered(record: ResultLine | dict[str, Any]) -> bool:
    """Whether a results line holds a reply (an answer the engine was paid for)."""
    if isinstance(record, ResultLine):
        response = record.response
        return response is not None and not record.error and response.status_code == 200
    return answered_body(record) is not None


_READER: RangeReader | None = None


def start_worker(store_path: str, secrets: tuple[str, ...]) -> None:
    """Process pool initializer: this worker's own connections to the store. The parent's
    connections a fork copies are frozen at once, so no collection here closes one, and the
    worker ends with `os._exit` (a test checks the parent holds no transaction at the fork)."""
    global _READER
    gc.freeze()
    parent = os.getppid()
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    store = Store(store_path, secrets=secrets)
    state = ExportState(store)
    _READER = RangeReader(store, state)


def _exit_with(parent: int) -> None:
    """End this worker once the process that started it is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def read_in_worker(task: RangeTask) -> RangeResult:
    """Process pool task: one range, read by this worker's `RangeReader`."""
    if _READER is None:
        raise RuntimeError("start_worker was not called in this process")
    return _READER.read(task)
