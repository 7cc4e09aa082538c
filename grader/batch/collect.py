"""Batch output and error lines turned into judgments, each validated exactly as a live reply. A
line that fails validation, an error line or a missing line is never a grade: it is re-asked
live, or stored failed with its reason."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard

from grader import defaults
from grader.errors import InputError
from grader.models import Doc, Judgment, JudgmentError, Query
from grader.store.store import Store

ParseReply = Callable[[Mapping[str, Any], Query, Doc, str], Judgment]  # (body, q, d, key)


@dataclass(frozen=True)
class LineProblem:
    """Why a key got no usable answer from the batch (`judgment`: the failed judgment made of
    its output line, when there was one)."""

    type: str
    message: str
    raw_reply: str | None = None
    judgment: Judgment | None = None


@dataclass
class ParsedFiles:
    """The answers of one batch: an ok judgment per graded key, a problem per other key."""

    judgments: dict[str, Judgment] = field(default_factory=dict)
    problems: dict[str, LineProblem] = field(default_factory=dict)


def _error_text(record: Mapping[str, Any]) -> tuple[str, str]:
    """(code, message) of an error line: `http_STATUS` and "HTTP STATUS [type]: message" when
    an HTTP status is known, else the Batch API's error code (`batch_expired`, ...)."""
    error = record.get("error")
    response = record.get("response")
    status = response.get("status_code") if _is_mapping(response) else None
    if _is_mapping(error):
        inner = error.get("error")  # vLLM's ErrorResponse: {"error": {message, type, code}}
        if _is_mapping(inner):
            error = inner
        code, message = error.get("code"), str(error.get("message") or "")
        if isinstance(code, int) and not isinstance(code, bool):
            return _http(code, error.get("type"), message)
        if code is None and isinstance(status, int) and status != 200:
            return _http(status, error.get("type"), message)
        return str(code or error.get("type") or "batch_error"), message
    if isinstance(error, str) and error:  # vLLM's run-batch writes other errors as a string
        return _http(status, None, error) if status else ("batch_error", error)
    if _is_mapping(response):
        body = response.get("body")
        if _is_mapping(body) and _is_mapping(body.get("error")):
            err = body["error"]
            code = err.get("code") or err.get("type") or f"http_{status}"
            return str(code), f"HTTP {status}: {err.get('message') or ''}".strip()
        return f"http_{status}", f"HTTP {status}"
    return "batch_error", "the batch gave no response for this request"


def _http(status: object, kind: object, message: str) -> tuple[str, str]:
    said = f"HTTP {status}" + (f" {kind}" if isinstance(kind, str) and kind else "")
    return f"http_{status}", f"{said}: {message}" if message else said


def _raw_content(body: Any) -> str | None:
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None if body is None else json.dumps(body)[:2000]
    return None if content is None else str(content)


def parse_result_files(
    output: bytes,
    errors: bytes,
    *,
    items: Mapping[str, tuple[Query, Doc]],
    parse: ParseReply,
) -> ParsedFiles:
    """Validate the lines of an output file and read an error file, for the keys in `items`
    (other lines were not asked for: ignored)."""
    result = ParsedFiles()
    for what, data in (("error", errors), ("output", output)):  # an output line decides
        for number, raw in enumerate(data.splitlines(), start=1):
            record = _load(raw) or {}
            key = str(record.get("custom_id"))
            if key not in items or key in result.judgments:
                continue
            query, doc = items[key]
            where = f"{what} line {number}"
            if what == "error":  # never a grade, whatever body the line carries
                code, message = _error_text(record)
                outcome: Judgment | LineProblem = LineProblem(
                    f"Batch:{code}", f"{where}: {message}" if message else where
                )
            else:
                outcome = parse_output_record(record, query, doc, key, parse, where=where)
            if isinstance(outcome, LineProblem):
                result.problems[key] = outcome
            else:
                result.problems.pop(key, None)
                result.judgments[key] = outcome
    for key in items:
        if key not in result.judgments and key not in result.problems:
            result.problems[key] = LineProblem(
                "Batch:missing", "no output or error line for this request"
            )
    return result


def parse_output_record(
    record: Mapping[str, Any], query: Query, doc: Doc, key: str, parse: ParseReply, *, where: str
) -> Judgment | LineProblem:
    """One output line (`{"custom_id", "response": {"status_code", "body"}, "error"}`)
    validated exactly as a live reply: an ok Judgment, or the problem with `where` in it."""
    body = answered_body(record)
    if body is None:
        code, message = _error_text(record)
        return LineProblem(f"Batch:{code}", f"{where}: {message}" if message else where)
    try:
        judgment = parse(body, query, doc, key)
    except Exception as exc:  # the validator's InvalidReply, or any malformed body
        return LineProblem(type(exc).__name__, f"{where}: {exc}", _raw_content(body))
    if judgment.status != "ok":
        error = judgment.error
        return LineProblem(
            error.type if error else "InvalidReply",
            f"{where}: {error.message if error else 'not ok'}",
            error.raw_reply if error else None,
            judgment,
        )
    return judgment


def answered_body(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reply body of an output line that holds one (no error, HTTP 200, a JSON object)."""
    response = record.get("response")
    if not _is_mapping(response) or record.get("error"):
        return None
    body = response.get("body")
    if response.get("status_code") != 200 or not _is_mapping(body):
        return None
    return body


def other_model(record: Mapping[str, Any], model: object) -> str | None:
    """The model a results line says answered it, when that is not `model`
    (`model_other_than`): an engine that ignored the request's model."""
    response = record.get("response")
    body = response.get("body") if _is_mapping(response) else None
    return model_other_than(body.get("model") if _is_mapping(body) else None, model)


def model_other_than(got: object, model: object) -> str | None:
    """`got`, the model a line names, when it is not `model` nor one of its dated snapshots
    (`model-YYYY-MM-DD`); None when it is, or is no name."""
    if not isinstance(got, str) or not isinstance(model, str) or got == model:
        return None
    if _SNAPSHOT.fullmatch(got[len(model) :]) and got.startswith(model):
        return None
    return got


_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}")


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """isinstance(value, Mapping), a plain dict told first (the ABC's check is slow)."""
    return type(value) is dict or isinstance(value, Mapping)


def _load(raw: bytes) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # (a value nested too deeply)
        return None
    return record if isinstance(record, dict) else None


def failed_judgment(
    key: str, query: Query, doc: Doc, problem: LineProblem, *, judge_id: str, prompt: Any
) -> Judgment:
    """The failed judgment stored when a batch line is not retried live."""
    if problem.judgment is not None:
        return problem.judgment
    return Judgment(
        query_id=query.query_id,
        doc_id=doc.doc_id,
        status="failed",
        judge=judge_id,
        prompt=prompt,
        key=key,
        attempts=1,
        error=JudgmentError(
            type=problem.type, message=problem.message, raw_reply=problem.raw_reply
        ),
    )


class _LiveJudge(Protocol):
    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment: ...


class _Pair(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def query_id(self) -> str: ...
    @property
    def doc_id(self) -> str: ...


def pair_texts(
    store: Store, pairs: Iterable[_Pair], *, whole: bool
) -> tuple[dict[str, Query], dict[str, Doc]]:
    """The query and document texts of these id pairs (`whole`: documents with title and
    metadata, as a live request needs; else text alone). A pair without its texts is an
    InputError: the store is not the one the pairs were recorded in."""
    pairs = list(pairs)
    queries = store.queries({x.query_id for x in pairs})
    ids = {x.doc_id for x in pairs}
    docs = store.docs(ids, whole=whole)
    for x in pairs:
        if x.query_id not in queries or x.doc_id not in docs:
            raise InputError(
                f"the store has no text for ({x.query_id}, {x.doc_id}), recorded as {x.key}",
                path=store.path,
                hint="export or regrade again from this store",
            )
    return queries, docs


def texts_by_key(store: Store, pairs: Iterable[_Pair]) -> dict[str, tuple[Query, Doc]]:
    """The (query, document) each key of these pairs asks, whole as a live request needs (the
    first pair's ids when several have a key)."""
    pairs = list(pairs)
    queries, docs = pair_texts(store, pairs, whole=True)
    found: dict[str, tuple[Query, Doc]] = {}
    for x in pairs:
        found.setdefault(x.key, (queries[x.query_id], docs[x.doc_id]))
    return found


async def retry_live(
    keys: Iterable[str],
    items: Mapping[str, tuple[Query, Doc]],
    judge: _LiveJudge,
    *,
    concurrency: int = defaults.CONCURRENCY,
) -> dict[str, Judgment]:
    """Ask the live judge for each of `keys`, at most `concurrency` at a time (a judge's
    `judge` never raises per pair)."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(key: str) -> tuple[str, Judgment]:
        query, doc = items[key]
        async with gate:
            return key, await judge.judge(query, doc, key=key)

    done = await asyncio.gather(*(one(k) for k in keys))
    return dict(done)
