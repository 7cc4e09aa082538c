"""What `batch import` does around the results lines: the files given checked, unanswered
requests of the touched request files stored failed (`Batch:missing`), failed requests asked
again live (`--reask`), and the import's summary. A mixin of `Importer`, which also does `batch
close`: once an export's engine is known dead, each line with no result yet is stored failed
(never a grade), so the next `batch export` asks exactly those again."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import defaults
from grader.batch.adapter import LLMBatchJudge
from grader.batch.collect import LineProblem, failed_judgment, retry_live, texts_by_key
from grader.batch.files.exports import ExportState, FileState, Line
from grader.errors import InputError
from grader.io.streams import LINE_LIMIT
from grader.judges.failures import failure_kind
from grader.models import Judgment
from grader.store.store import Store


@dataclass
class ImportSummary:
    """What an import did, in result lines (one per content key): `ok`, `failed` and `missing`
    this import stored, `already` stored before it (or meanwhile by another process)."""

    files: int = 0
    lines: int = 0
    ok: int = 0
    failed: int = 0
    missing: int = 0
    already: int = 0
    truncated: list[str] = field(default_factory=list)  # "file:line" of cut-short last lines
    malformed: list[str] = field(default_factory=list)  # "file:line" of unreadable lines
    n_malformed: int = 0
    paid_twice: int = 0  # answers to requests answered ok already (another export, live, a retry)
    reasked_ok: int = 0
    reasked_failed: int = 0
    permanent: int = 0  # failed requests --reask left alone: the same request fails again
    touched: set[tuple[str, int]] = field(default_factory=set)  # (export id, request file)
    problems: dict[str, int] = field(default_factory=dict)  # failure type -> count
    empty: list[str] = field(default_factory=list)  # results files with no line at all
    still_missing: int | None = None  # requests of the touched files not ok in the store now


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


class ImportFollowUp:
    """Missing and re-asked requests of an import (see the module docstring)."""

    store: Store
    state: ExportState
    judge_for: Callable[[dict[str, Any]], LLMBatchJudge]
    _judges: dict[str, LLMBatchJudge]

    def judge(self, export_id: str, path: str | Path, line: int | None = None) -> LLMBatchJudge:
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

    def _not_ok(self, export_id: str, lines: list[Line]) -> list[Line]:
        """`lines` but those whose key the store holds ok by now (answered live, or through
        another export), which are set ok."""
        statuses = self.store.statuses(x.key for x in lines)
        done = {x.key for x in lines if statuses.get(x.key) == "ok"}
        if done:
            self.state.set_outcomes(export_id, dict.fromkeys(done, "ok"))
        return [x for x in lines if x.key not in done]

    def _open_lines(
        self, summary: ImportSummary, outcome: str | None, limit: int = 2000
    ) -> Iterator[tuple[str, int, list[Line]]]:
        """(export, request file, lines) of the touched request files' lines with `outcome`, a
        page at a time, but those whose key the store holds ok by now (`_not_ok`)."""
        for export_id, file_no in sorted(summary.touched):
            after = 0
            while lines := self.state.lines_with(outcome, export_id, file_no, after, limit):
                after = lines[-1].line_no
                yield export_id, file_no, self._not_ok(export_id, lines)

    def _store(self, export_id: str, judgments: dict[str, Judgment]) -> None:
        """Store `judgments` by key, then their lines' outcomes: a crash between leaves outcomes
        to repair (the next import sets them), never an answer lost."""
        if judgments:
            fingerprint = self._judges[export_id].fingerprint()
            self.store.put_many((j, fingerprint) for j in judgments.values())
            self.state.set_outcomes(export_id, {k: j.status for k, j in judgments.items()})

    def unresolved(self, summary: ImportSummary) -> int:
        """Requests of the touched request files with no ok answer in the store now (also
        `summary.still_missing`)."""
        left = sum(len(lines) for _, _, lines in self._open_lines(summary, "failed"))
        summary.still_missing = left
        return left

    def _mark_missing(self, summary: ImportSummary, *, closed: bool = False) -> None:
        """Store failed the requests of the touched request files no line answered (`closed`:
        of an export `batch close` closed)."""
        for export_id, file_no, todo in self._open_lines(summary, None):
            judge = self._judges[export_id]
            who: dict[str, Any] = {"judge_id": judge.judge_id, "prompt": judge.prompt_ref}
            problem = LineProblem("Batch:missing", _missing(export_id, file_no, closed))
            texts = texts_by_key(self.store, todo)
            failed = {k: failed_judgment(k, q, d, problem, **who) for k, (q, d) in texts.items()}
            self._store(export_id, failed)
            summary.missing += len(failed)

    def close_export(self, export_id: str) -> CloseSummary:
        """`batch close` (module docstring): every line of `export_id` with no result yet is
        stored failed; results that come back for it later are still imported."""
        before = self.state.file_states(export_id)
        self.judge(export_id, self.store.path)
        summary = ImportSummary(touched={(export_id, f.file_no) for f in before if f.waiting})
        self._mark_missing(summary, closed=True)
        already = sum(f.waiting for f in before) - summary.missing
        return CloseSummary(export_id, summary.missing, already, self.state.file_states(export_id))

    async def reask_failed(
        self, summary: ImportSummary, *, concurrency: int = defaults.CONCURRENCY
    ) -> None:
        """Ask live every failed request of the touched request files, through each export's
        judge, storing each answer as live grading does. A fatal JudgeError stops it; what was
        answered is kept. A permanent failure (past the context, an unknown model) is left
        alone: it would fail again, and may be paid again (`permanent`)."""
        for export_id, _, lines in self._open_lines(summary, "failed", limit=500):
            stored = self.store.get_many(x.key for x in lines)
            kind = {k: failure_kind(j.error) for k, j in stored.items()}
            todo = [x for x in lines if kind.get(x.key) != "permanent"]
            summary.permanent += len(lines) - len(todo)
            items = texts_by_key(self.store, todo)
            answers = await retry_live(
                items, items, self._judges[export_id], concurrency=concurrency
            )
            self._store(export_id, answers)
            ok = sum(1 for a in answers.values() if a.status == "ok")
            summary.reasked_ok += ok
            summary.reasked_failed += len(answers) - ok


def _missing(export_id: str, file_no: int, closed: bool) -> str:
    """Why a request of request file `file_no` has no answer."""
    if closed:
        return (
            f"export {export_id} was closed (batch close) with no results line for this request"
            f" of request file {file_no}; export again to ask it, or import with --reask"
        )
    return (
        f"no results line for this request of request file {file_no} "
        f"(export {export_id}); rerun the engine on it, or import with --reask"
    )


def jsonl_files(paths: Sequence[str | Path], what: str = "results") -> list[Path]:
    """The files named: files as given, folders' `*.jsonl` in name order."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".jsonl")
            if not inside:
                raise InputError(f"no .jsonl {what} file in this folder", path=path)
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise InputError(f"no such {what} file or folder", path=path)
    return found


def first_record(path: Path) -> tuple[int, Any]:
    """(number, JSON value) of the first line of `path` that is not blank (None: not JSON)."""
    with path.open("rb") as fh:
        for number, raw in enumerate(iter(lambda: fh.readline(LINE_LIMIT), b""), 1):
            if raw.strip():
                try:
                    return number, json.loads(raw)
                except ValueError:
                    return number, None
    return 0, None


def refuse_request_files(files: Sequence[Path]) -> None:
    """InputError when a file given as results is a request file (its first line has `method`,
    `url` and `body` and no `response` or `error`): nothing is imported, none of its
    requests is marked failed."""
    for path in files:
        number, line = first_record(path)
        if (
            isinstance(line, dict)
            and {"method", "url", "body"} <= line.keys()
            and not {"response", "error"} & line.keys()
        ):
            raise InputError(
                "this is a request file (its lines have method, url and body, no "
                "response): batch import takes the results an engine wrote for it; "
                "nothing was imported",
                path=path,
                line=number,
                hint="run the engine on it first (vllm run-batch -i REQUESTS -o "
                "RESULTS), then import RESULTS",
            )


def nothing_usable(files: list[Path], summary: ImportSummary) -> InputError:
    """The error of an import whose files hold no usable results line, with why."""
    reasons = []
    if summary.n_malformed:
        shown = ", ".join(summary.malformed)
        more = ", ..." if summary.n_malformed > len(summary.malformed) else ""
        reasons.append(f"{summary.n_malformed:,} lines are not JSON ({shown}{more})")
    if summary.truncated:
        reasons.append(f"a last line is cut short ({', '.join(summary.truncated)})")
    if summary.empty:
        reasons.append(f"{len(summary.empty)} files are empty")
    said = "no usable results line: " + ("; ".join(reasons) or "no line holds a result")
    if len(summary.empty) == len(files):  # (the import does not start)
        who = "the file is" if len(files) == 1 else f"all {len(files)} files are"
        said = f"no results lines: {who} empty"
    return InputError(
        said + "; nothing was imported",
        path=files[0] if len(files) == 1 else ", ".join(map(str, files)),
        hint="import the results an engine wrote for the request files of `relgrade batch "
        "export`, e.g. vllm run-batch -i REQUESTS -o RESULTS",
    )
