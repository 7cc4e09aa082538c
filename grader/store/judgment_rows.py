"""How schema 8 keeps a judgment: its JSON in parts, the parts other rows repeat kept once.

A judgment's JSON (pydantic's compact `model_dump_json`) is, in field order,

    {"query_id":Q,"doc_id":D,"grade":G,"status":"S",HEAD,"judge":J,"prompt":P,"key":K,TAIL,
     "created_at":"T",EXTRA}

A judgments row keeps Q, D, G, S and T in columns, the key K as its 32 raw bytes, HEAD (reason,
distribution, expected grade, output mode, notes) and TAIL (attempts, usage, cost, latency,
truncation, error) as text, and EXTRA (an ensemble's or verifier's fields) only when it is not
all null. J and P (and the judge's model and fingerprint) are the same on a million rows: they
live once in `judgment_sources`, named by id. `assemble` (and the SQL of `JSON_SQL`, for the view
`judgment_rows`) put the parts back together byte for byte, so the JSON read back is the JSON
written, and a rerun streams it to `--out` without a Python step per field.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from pydantic_core import to_json

from grader.errors import StoreError
from grader.models import Judgment, PromptRef, Usage, bare_sha256

KEY_TAG = "sha256:"
DEFAULT_EXTRA = '"judges":null,"disagreement":null,"verification":null'

# Field names at the seams, in the order pydantic writes them (see the module docstring).
_REASON = ',"reason":'
_JUDGE = ',"judge":'
_ATTEMPTS = ',"attempts":'
_CREATED = ',"created_at":"'
_JUDGES = '","judges":'


def encode_key(key: str) -> bytes | str:
    """The stored form of a content key: `sha256:<64 lowercase hex>` as its 32 bytes; any other
    text (never written by relgrade's key functions) as it is."""
    if len(key) == 71 and key.startswith(KEY_TAG):
        try:
            raw = bytes.fromhex(key[7:])
        except ValueError:
            return key
        if len(raw) == 32 and raw.hex() == key[7:]:  # lowercase, no spaces: exactly undone
            return raw
    return key


def encode_keys(keys: Sequence[str]) -> bytes | None:
    """`encode_key` of every one of `keys` joined, in one go, when each is 32 bytes (keys as
    relgrade writes them); else None (then encode them one by one)."""
    if not keys or not all(len(k) == 71 and k.startswith(KEY_TAG) for k in keys):
        return None
    hexes = "".join(k[7:] for k in keys)
    try:
        blob = bytes.fromhex(hexes)
    except ValueError:
        return None
    return blob if len(blob) == 32 * len(keys) and blob.hex() == hexes else None


def decode_key(value: bytes | str) -> str:
    """The content key of a stored key value (`encode_key` undone)."""
    if isinstance(value, bytes):
        return KEY_TAG + value.hex()
    return value


class JudgmentParts(NamedTuple):
    """The parts of one judgment's JSON that its row keeps as text (module docstring)."""

    head: str
    tail: str
    created_at: str
    extra: str | None  # None: DEFAULT_EXTRA


def split(text: str) -> JudgmentParts:
    """The parts of a judgment's JSON as pydantic writes it. Each seam is the first of its
    field name after the previous seam: string values escape their quotes, so a name with its
    quote and colon cannot occur inside one, and no object before a seam has a field of that
    name."""
    head_at = text.index(_REASON) + 1
    judge_at = text.index(_JUDGE, head_at)
    tail_at = text.index(_ATTEMPTS, judge_at) + 1
    created_at = text.index(_CREATED, tail_at)
    extra_at = text.index(_JUDGES, created_at)
    extra = text[extra_at + 2 : -1]
    return JudgmentParts(
        head=text[head_at:judge_at],
        tail=text[tail_at:created_at],
        created_at=text[created_at + len(_CREATED) : extra_at],
        extra=None if extra == DEFAULT_EXTRA else extra,
    )


@dataclass(frozen=True)
class Source:
    """What a million rows share: the judge, its model and prompt, and its fingerprint."""

    judge: str
    model: str | None
    prompt_name: str | None
    prompt_version: str | None
    prompt_sha: str | None
    fingerprint: str | None  # canonical JSON, secrets masked

    @functools.cached_property
    def judge_json(self) -> str:
        return to_json(self.judge).decode()

    @functools.cached_property
    def prompt_json(self) -> str:
        if self.prompt_name is None:
            return "null"
        return to_json(
            {"name": self.prompt_name, "version": self.prompt_version, "sha256": self.prompt_sha}
        ).decode()

    @functools.cached_property
    def signature(self) -> str:
        """One text naming this source (the table's unique column)."""
        return json.dumps(
            [
                self.judge,
                self.model,
                self.prompt_name,
                self.prompt_version,
                self.prompt_sha,
                self.fingerprint,
            ],
            ensure_ascii=False,
        )


def created_text(judgment: Judgment) -> str:
    """`judgment.created_at` as its JSON (and the `created_at` column) writes it."""
    return to_json(judgment.created_at).decode()[1:-1]


def id_json(value: str) -> str:
    """An id as the judgment JSON writes it."""
    return to_json(value).decode()


def assemble(
    *,
    query_id: str,
    doc_id: str,
    grade: int | None,
    status: str,
    parts: JudgmentParts,
    judge_json: str,
    prompt_json: str,
    key: str,
) -> str:
    """A judgment's JSON from its row (`split` undone)."""
    return (
        '{"query_id":'
        + id_json(query_id)
        + ',"doc_id":'
        + id_json(doc_id)
        + ',"grade":'
        + ("null" if grade is None else str(grade))
        + ',"status":"'
        + status
        + '",'
        + parts.head
        + ',"judge":'
        + judge_json
        + ',"prompt":'
        + prompt_json
        + ',"key":'
        + id_json(key)
        + ","
        + parts.tail
        + ',"created_at":"'
        + parts.created_at
        + '",'
        + (DEFAULT_EXTRA if parts.extra is None else parts.extra)
        + "}"
    )


def ok_parts(
    *,
    reason: str | None,
    distribution: list[float] | None,
    expected_grade: float | None,
    attempts: int,
    usage: Usage,
    cost: float | None,
    truncated: bool,
    created_at: datetime,
    output_mode: str | None = None,
    notes: list[str] | None = None,
) -> JudgmentParts:
    """The parts `split` takes from the JSON of an ok judgment with these fields (no latency,
    error, ensemble or verifier fields), made without the model between: the same serializer
    (pydantic-core's) writes each string, float and time, and integers are written as it
    writes them, so the text is byte for byte the model's (a hypothesis test compares the
    two). An import's workers make a million."""
    head = to_json(
        {
            "reason": reason,
            "distribution": distribution,
            "expected_grade": expected_grade,
            "output_mode": output_mode,
            "notes": notes,
        }
    )
    cost_json = "null" if cost is None else to_json(cost).decode()
    tail = (  # ints are written as str() writes them, so only the float goes through to_json
        f'"attempts":{int(attempts)},"usage":{{"prompt_tokens":{int(usage.prompt_tokens)},'
        f'"completion_tokens":{int(usage.completion_tokens)},'
        f'"cached_tokens":{int(usage.cached_tokens)}}},"cost":{cost_json},"latency_ms":null,'
        f'"truncated":{"true" if truncated else "false"},"error":null'
    )
    # tuple.__new__ makes the NamedTuple in C, skipping its Python-level __new__ and keywords
    return tuple.__new__(JudgmentParts, (head[1:-1].decode(), tail, _time_text(created_at), None))


def _time_text(moment: datetime) -> str:
    """pydantic-core's text of a time, kept for the last one given: an import gives the
    lines of a group one time, so the text is made once a group."""
    global _LAST_TIME
    last = _LAST_TIME
    if last is not None and last[0] is moment:
        return last[1]
    text = to_json(moment)[1:-1].decode()
    _LAST_TIME = (moment, text)
    return text


_LAST_TIME: tuple[datetime, str] | None = None


def key_sql(column: str) -> str:
    """SQL giving the content key text of a stored key column (`decode_key`)."""
    return (
        f"CASE typeof({column}) WHEN 'blob' THEN '{KEY_TAG}' || lower(hex({column}))"
        f" ELSE {column} END"
    )


def rest_sql(j: str, s: str) -> str:
    """SQL giving a judgment's JSON after its two ids (from `,"grade":` to the end), from the
    judgments row `j` and its source row `s` (`assemble` in SQL)."""
    return (
        f"""',"grade":' || ifnull({j}.grade, 'null') || ',"status":"' || {j}.status || '",'"""
        f""" || {j}.head || ',"judge":' || {s}.judge_json || ',"prompt":' || {s}.prompt_json"""
        f""" || ',"key":' || json_quote({key_sql(f"{j}.key")}) || ',' || {j}.tail"""
        f""" || ',"created_at":"' || {j}.created_at || '",'"""
        f""" || ifnull({j}.extra, '{DEFAULT_EXTRA}') || '}}'"""
    )


def json_sql(j: str, s: str, ids: str | None = None) -> str:
    """SQL giving a judgment's whole JSON, with the ids of row `ids` (default: `j`'s own)."""
    ids = ids or j
    return (
        f"""'{{"query_id":' || json_quote({ids}.query_id) || ',"doc_id":'"""
        f" || json_quote({ids}.doc_id) || {rest_sql(j, s)}"
    )


class StoredRow(NamedTuple):
    """A `Store._judgment_row` row as schema 8 keeps it: the columns but the source id (key,
    query_id, doc_id | status, grade, created_at, head, tail, extra), its source, and whether
    a newer ok answer may replace it (an output built from answers: see `Store`)."""

    columns: tuple[Any, ...]
    source: Source
    replaceable: int = 0


@functools.lru_cache(maxsize=256)
def _source(
    judge: str,
    model: str | None,
    name: str | None,
    version: str | None,
    sha: str | None,
    fingerprint: str | None,
) -> Source:
    """The Source of these columns, made once (its JSON texts are cached on it)."""
    return Source(
        judge=judge,
        model=model,
        prompt_name=name,
        prompt_version=version,
        prompt_sha=None if sha is None else bare_sha256(sha),
        fingerprint=fingerprint,
    )


def stored_row(row: tuple[Any, ...]) -> StoredRow:
    """`row` (key, ids, judge, model, prompt name/version/sha, status, grade, created_at,
    fingerprint, judgment JSON[, replaceable]) in parts (`in_parts`)."""
    key, qid, did, judge, model, name, version, sha, status, grade = row[:10]
    source = _source(judge, model, name, version, sha, row[11])
    replaceable = row[13] if len(row) > 13 else 0  # a migrated row has no such column
    return in_parts(key, qid, did, status, grade, row[12], source, replaceable)


def source_of(judgment: Judgment, model: Any, fingerprint: str | None) -> Source:
    """The source row of `judgment` given its judge's model and (masked) fingerprint JSON."""
    return sources_for(
        judgment.judge, None if model is None else str(model), judgment.prompt, fingerprint
    )


def sources_for(
    judge: str, model: str | None, prompt: PromptRef | None, fingerprint: str | None
) -> Source:
    """The source row of a judge's judgments, given its model, prompt and (masked) fingerprint
    JSON (made once: `_source` keeps the last few)."""
    return _source(
        judge,
        model,
        prompt.name if prompt else None,
        prompt.version if prompt else None,
        prompt.sha256 if prompt else None,
        fingerprint,
    )


def in_parts(
    key: str,
    query_id: str,
    doc_id: str,
    status: str,
    grade: int | None,
    text: str,
    source: Source,
    replaceable: int = 0,
) -> StoredRow:
    """A judgment's JSON `text` as its row keeps it. A text the parts would not give back byte
    for byte (written by an older version, e.g. from a journal) goes through the model first;
    one that still would not is refused rather than stored otherwise."""
    for attempt in range(2):
        try:
            parts = split(text)
        except ValueError:  # not as pydantic writes it (e.g. spaces after the separators)
            parts = None
        if parts is not None and text == assemble(
            query_id=query_id,
            doc_id=doc_id,
            grade=grade,
            status=status,
            parts=parts,
            judge_json=source.judge_json,
            prompt_json=source.prompt_json,
            key=key,
        ):
            columns = (encode_key(key), query_id, doc_id, status, grade, parts.created_at)
            return StoredRow((*columns, parts.head, parts.tail, parts.extra), source, replaceable)
        if attempt == 0:
            text = Judgment.model_validate_json(text).model_dump_json()
    raise StoreError(f"the judgment of {query_id} {doc_id} ({key}) does not fit the store's layout")
