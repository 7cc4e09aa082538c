"""How the store keeps a judgment: the columns it selects by (key as 32 bytes, ids, status, grade,
time, source once in `judgment_sources`) and one payload `encode` writes of every other field, so a
new `Judgment` field changes models.py alone. `json_sql` puts the JSON back together in SQL."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass
from datetime import datetime
from typing import Any, NamedTuple

from pydantic_core import to_json

from grader.errors import StoreError
from grader.models import Judgment, PromptRef, bare_sha256

KEY_TAG = "sha256:"

COLUMN_FIELDS = ("key", "query_id", "doc_id", "status", "grade", "created_at", "judge", "prompt")
"""The fields a row keeps in its columns and its source; the others are its payload."""


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
    """`encode_key` of all `keys` joined, when each is 32 bytes; else None (encode one by one)."""
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
    return KEY_TAG + value.hex() if isinstance(value, bytes) else value


def key_sql(column: str) -> str:
    """SQL giving the content key text of a stored key column (`decode_key`)."""
    return (
        f"CASE typeof({column}) WHEN 'blob' THEN '{KEY_TAG}' || lower(hex({column}))"
        f" ELSE {column} END"
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
        return _prompt_json(self.prompt_name, self.prompt_version, self.prompt_sha)

    @functools.cached_property
    def signature(self) -> str:
        """One text naming this source (the table's unique column)."""
        return json.dumps(astuple(self), ensure_ascii=False)


def _prompt_json(name: str | None, version: str | None, sha: str | None) -> str:
    """A judgment's prompt as its JSON writes it."""
    if name is None:
        return "null"
    return to_json({"name": name, "version": version, "sha256": sha}).decode()


@functools.lru_cache(maxsize=256)
def sources_for_columns(
    judge: str,
    model: str | None,
    name: str | None,
    version: str | None,
    sha: str | None,
    fingerprint: str | None,
) -> Source:
    """The Source of these columns (fingerprint: masked JSON), made once."""
    sha = None if sha is None else bare_sha256(sha)
    return Source(judge, model, name, version, sha, fingerprint)


def prompt_columns(prompt: PromptRef | None) -> tuple[str | None, str | None, str | None]:
    """A prompt's name, version and sha256 (all None without one)."""
    if prompt is None:
        return None, None, None
    return prompt.name, prompt.version, prompt.sha256


_INSERT_SOURCE = """
INSERT INTO judgment_sources (signature, judge, model, prompt_name, prompt_version, prompt_sha,
                              fingerprint, judge_json, prompt_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (signature) DO UPDATE SET signature = excluded.signature RETURNING id
"""


def source_id(conn: sqlite3.Connection, source: Source, cache: dict[str, int]) -> int:
    """The id of `source` in `judgment_sources` (added when new); `cache` by signature."""
    signature = source.signature
    found = cache.get(signature)
    if found is None:
        columns = (signature, *astuple(source), source.judge_json, source.prompt_json)
        found = cache[signature] = conn.execute(_INSERT_SOURCE, columns).fetchone()[0]
    return found


class _Required:
    """Stands for a payload field without a default, until a value is given for it."""

    def __init__(self, name: str) -> None:
        self.name = name


_PAYLOAD_DEFAULTS = {
    name: _Required(name) if info.is_required() else info.get_default(call_default_factory=True)
    for name, info in Judgment.model_fields.items()
    if name not in COLUMN_FIELDS
}
"""Each payload field of `Judgment`, in the model's order, with its default."""
NULL_FIELDS = tuple(name for name, default in _PAYLOAD_DEFAULTS.items() if default is None)
"""The payload fields whose default is None: a payload leaves out those that are None."""
_NULLS_BACK = ", ".join(f"'$.{name}', NULL" for name in NULL_FIELDS)
"""`json_insert`'s arguments that give each of NULL_FIELDS a payload left out back, as null."""


def _unencodable(value: Any) -> Any:
    if isinstance(value, _Required):
        raise StoreError(f"a judgment to store has no {value.name!r} (a field without default)")
    raise StoreError(f"a judgment to store holds a value JSON cannot write: {value!r}")


def time_text(moment: datetime) -> str:
    """A time as the judgment's JSON (and the `created_at` column) writes it."""
    return to_json(moment).decode()[1:-1]


def id_json(value: str) -> str:
    """An id as the judgment JSON writes it."""
    return to_json(value).decode()


Columns = tuple[bytes | str, str, str, str, int | None, str, str]
"""A judgments row but its source: key, ids, status, grade, created_at, payload."""


def encode(fields: Mapping[str, Any]) -> Columns:
    """The row of a judgment with these fields by name (a Judgment's `vars()` or a dict; the rest
    take the model's defaults). NULL_FIELDS that are None are left out of the payload."""
    payload = {}
    for name, default in _PAYLOAD_DEFAULTS.items():
        value = fields.get(name, default)
        if value is not None or default is not None:
            payload[name] = value
    return (
        encode_key(fields["key"]),
        fields["query_id"],
        fields["doc_id"],
        fields["status"],
        fields["grade"],
        time_text(fields["created_at"]),
        to_json(payload, fallback=_unencodable).decode(),
    )


class StoredRow(NamedTuple):
    """A judgments row as the store writes it: its columns (`encode`, masked), its source, and
    whether a newer ok answer may replace it."""

    columns: Columns
    source: Source
    replaceable: int = 0


def replaceable(judgment: Judgment) -> int:
    """1 when a newer ok judgment may replace this one: an output built from answers."""
    return int(judgment.judges is not None or judgment.verification is not None)


def from_journal_row(row: Sequence[Any]) -> StoredRow:
    """The StoredRow of a journal row (`Store.rows`); its JSON goes through the model, so an older
    version's row is stored as this one writes it."""
    key, qid, did, judge, model, name, version, sha = row[:8]
    source = sources_for_columns(judge, model, name, version, sha, row[11])
    judgment = Judgment.model_validate_json(row[12])
    fields = {**vars(judgment), "key": key, "query_id": qid, "doc_id": did}
    return StoredRow(encode(fields), source, row[13] if len(row) > 13 else 0)


def json_sql(j: str, s: str) -> str:
    """SQL giving a judgment's JSON from judgments row `j` and source row `s` (nulls put back)."""
    return (
        f"""'{{"query_id":' || json_quote({j}.query_id) || ',"doc_id":'"""
        f""" || json_quote({j}.doc_id) || ',"grade":' || ifnull({j}.grade, 'null')"""
        f""" || ',"status":"' || {j}.status || '","judge":' || {s}.judge_json"""
        f""" || ',"prompt":' || {s}.prompt_json || ',"key":' || json_quote({key_sql(f"{j}.key")})"""
        f""" || ',"created_at":"' || {j}.created_at || '",'"""
        f""" || substr(json_insert({j}.payload, {_NULLS_BACK}), 2)"""
    )


def judgment_json(judgment: Judgment) -> str:
    """The JSON `json_sql` gives of `judgment` once stored, made in Python: `--out` lines of held
    judgments equal those streamed from the store (tested)."""
    fields = vars(judgment)
    _, query_id, doc_id, status, grade, created_at, payload = encode(fields)
    prompt_json = _prompt_json(*prompt_columns(judgment.prompt))
    # Each of NULL_FIELDS `encode` left out, back as null at the end (as `json_insert` does).
    nulls = "".join(f',"{name}":null' for name in NULL_FIELDS if fields.get(name) is None)
    if nulls:
        payload = payload[:-1] + (nulls[1:] if payload == "{}" else nulls) + "}"
    return (
        f'{{"query_id":{id_json(query_id)},"doc_id":{id_json(doc_id)},'
        f'"grade":{"null" if grade is None else int(grade)},"status":"{status}",'
        f'"judge":{id_json(judgment.judge)},"prompt":{prompt_json},'
        f'"key":{id_json(judgment.key)},"created_at":"{created_at}",{payload[1:]}'
    )


ROWS_VIEW = f"""CREATE VIEW judgment_rows AS
SELECT {key_sql("j.key")} AS key, j.query_id, j.doc_id, s.judge, s.model, s.prompt_name,
       s.prompt_version, s.prompt_sha, j.status, j.grade, j.created_at, s.fingerprint,
       {json_sql("j", "s")} AS judgment, j.key AS stored_key, j.source_id
FROM judgments j JOIN judgment_sources s ON s.id = j.source_id"""
"""Each judgment with its columns and whole JSON; made when a store opens (`view_is_current`)."""


def view_is_current(conn: sqlite3.Connection) -> bool:
    """Whether the store's view `judgment_rows` is this version's `ROWS_VIEW`."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'judgment_rows'"
    ).fetchone()
    return row is not None and row[0] == ROWS_VIEW
