"""The store keeps a judgment as columns and one payload written by one encoder; putting them back
together (in SQLite, at one place) gives the judgment's JSON equal as JSON to pydantic's, whatever
its text holds, and a row made as an import's workers make it equals the live path's."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.cli.main import main
from grader.models import Judgment, JudgmentError, PromptRef, Usage
from grader.store.judgment_rows import (
    COLUMN_FIELDS,
    NULL_FIELDS,
    decode_key,
    encode,
    encode_key,
    json_sql,
    judgment_json,
    view_is_current,
)
from grader.store.migrations import MIGRATIONS
from grader.store.store import Store
from tests.grade_data import write_grade_files
from tests.helpers.hypothesis_scale import examples
from tests.helpers.judgments import stored_judgments
from tests.helpers.old_stores import write_old_store
from tests.helpers.params import quick_first

TEXT = st.text(max_size=40)  # any code point: quotes, backslashes, control characters, emoji
ID = st.text(min_size=1, max_size=12)
HEX_KEY = st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex())
FLOAT = st.floats(allow_nan=False, allow_infinity=False, width=64)
SEAMS = st.sampled_from(
    [',"judge":', ',"attempts":', ',"created_at":"', '","judges":', ',"reason":', '"}']
)


@st.composite
def judgments(draw: st.DrawFn) -> Judgment:
    failed = draw(st.booleans())
    reason = draw(st.one_of(st.none(), TEXT, SEAMS))
    dist = draw(st.one_of(st.none(), st.lists(st.floats(0, 1), min_size=4, max_size=4)))
    prompt = draw(
        st.one_of(
            st.none(),
            st.builds(PromptRef, name=ID, version=ID, sha256=st.just("ab" * 32)),
        )
    )
    error = None
    if failed:
        error = JudgmentError(
            type=draw(ID), message=draw(st.one_of(TEXT, SEAMS)), raw_reply=draw(st.none() | TEXT)
        )
    return Judgment(
        query_id=draw(ID),
        doc_id=draw(ID),
        grade=None if failed else draw(st.integers(0, 3)),
        status="failed" if failed else "ok",
        reason=reason,
        distribution=dist,
        expected_grade=draw(st.none() | FLOAT),
        judge=draw(ID),
        prompt=prompt,
        key=draw(st.one_of(HEX_KEY, ID)),
        attempts=draw(st.integers(0, 9)),
        usage=Usage(prompt_tokens=draw(st.integers(0, 10**6))),
        cost=draw(st.none() | FLOAT),
        latency_ms=draw(st.none() | FLOAT),
        truncated=draw(st.booleans()),
        error=error,
        created_at=draw(st.datetimes(timezones=st.just(UTC))),
        judges=draw(st.none() | st.dictionaries(ID, st.none() | st.integers(0, 3), max_size=3)),
        disagreement=draw(st.none() | FLOAT),
        verification=draw(st.none() | st.dictionaries(SEAMS | ID, TEXT | SEAMS, max_size=3)),
    )


def _without_nulls(payload: str) -> dict[str, Any]:
    """A payload's fields, but those of NULL_FIELDS that are null (`encode` leaves them out)."""
    fields = json.loads(payload)
    return {k: v for k, v in fields.items() if v is not None or k not in NULL_FIELDS}


def _equal_as_json(text: str, judgment: Judgment) -> bool:
    return bool(json.loads(text) == json.loads(judgment.model_dump_json()))


@settings(max_examples=examples(200), deadline=None)
@given(judgments())
def test_a_row_gives_back_the_judgment_equal_as_json(judgment: Judgment) -> None:
    with Store(":memory:") as store:
        store.put_many([(judgment, {"judge": judgment.judge})])
        (text,) = store._conn.execute("SELECT judgment FROM judgment_rows").fetchone()
        (payload,) = store._conn.execute("SELECT payload FROM judgments").fetchone()
        got = store.get_many([judgment.key])
    assert _equal_as_json(text, judgment)
    assert text == judgment_json(judgment)  # the lines of held judgments are the stored ones'
    assert got == {judgment.key: judgment}
    # the payload: every field but the columns', as the model writes them, but a None left out
    written = json.loads(judgment.model_dump_json(exclude=set(COLUMN_FIELDS)))
    kept = {name: v for name, v in written.items() if v is not None or name not in NULL_FIELDS}
    assert json.loads(payload) == kept


def test_a_payload_holding_its_nulls_reads_back_as_one_leaving_them_out() -> None:
    """A row written before Nones were left out of the payload (every field in it) gives the
    same judgment, equal as JSON, as a row written now."""
    judgment = Judgment(
        query_id="q",
        doc_id="d",
        grade=2,
        status="ok",
        reason='caf\u00e9 "quoted" \\ and a newline\n',
        judge="lexical",
        key="sha256:" + "ab" * 32,
        latency_ms=2.2588869996980065,
        cost=0.0,
    )
    with Store(":memory:") as store:
        store.put_many([(judgment, {"judge": judgment.judge})])
        conn = store._conn
        (now,) = conn.execute("SELECT judgment FROM judgment_rows").fetchone()
        (payload,) = conn.execute("SELECT payload FROM judgments").fetchone()
        assert "null" not in payload  # the eight None fields of a lexical judgment are left out
        full = judgment.model_dump_json(exclude=set(COLUMN_FIELDS))
        conn.execute("UPDATE judgments SET payload = ?", (full,))
        (before,) = conn.execute("SELECT judgment FROM judgment_rows").fetchone()
        assert len(full) - len(payload) > 100
    assert json.loads(before) == json.loads(now) == json.loads(judgment.model_dump_json())
    assert now == judgment_json(judgment)


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(st.lists(judgments(), min_size=1, max_size=5))
def test_the_store_and_its_view_give_back_each_judgment_equal_as_json(
    tmp_path_factory: Any, batch: list[Judgment]
) -> None:
    path: Path = tmp_path_factory.mktemp("s") / "s.db"
    unique = list({j.key: j for j in batch}.values())
    with Store(path) as store:
        store.put_many((j, {"judge": j.judge}) for j in unique)
        got = store.get_many(j.key for j in unique)
        assert got == {j.key: j for j in unique}
    with sqlite3.connect(path) as conn:
        view = dict(conn.execute("SELECT key, judgment FROM judgment_rows").fetchall())
        by_sql = dict(
            conn.execute(
                f"SELECT j.key, {json_sql('j', 's')} FROM judgments j"
                " JOIN judgment_sources s ON s.id = j.source_id"
            ).fetchall()
        )
    conn.close()
    assert {decode_key(k): v for k, v in by_sql.items()} == view
    assert view.keys() == {j.key for j in unique}
    assert all(_equal_as_json(view[j.key], j) for j in unique)


def test_a_sha256_key_is_kept_as_32_bytes_and_any_other_as_text() -> None:
    key = "sha256:" + "0f" * 32
    assert encode_key(key) == bytes.fromhex("0f" * 32)
    assert encode_key("sha256:" + "0F" * 32) == "sha256:" + "0F" * 32  # not as relgrade writes
    assert encode_key("k1") == "k1"
    assert decode_key(encode_key(key)) == key


def test_an_old_judgment_json_is_written_as_this_version_writes_it(tmp_path: Path) -> None:
    """A journaled row written otherwise (tagged prompt sha, spaces) is stored through the model."""
    sha = "cd" * 32
    judgment = Judgment(
        query_id="q",
        doc_id="d",
        grade=1,
        status="ok",
        judge="lexical",
        key="sha256:" + "1" * 64,
        prompt=PromptRef(name="lexical", version="1", sha256=sha),
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    with Store(tmp_path / "s.db") as store:
        rows = store.rows([(judgment, None)])
        row = list(rows.judgments[0])
        row[7] = "sha256:" + sha
        # spaces after the separators, as json.dumps writes them
        row[12] = json.dumps(json.loads(row[12].replace(sha, "sha256:" + sha)))
        rows.judgments[0] = tuple(row)
        store.write_rows(rows)
        (got,) = store.get_many([judgment.key]).values()
    assert got.model_dump_json() == judgment.model_dump_json()


@st.composite
def ok_fields(draw: st.DrawFn) -> dict[str, Any]:
    """The fields of an ok judgment as an imported batch reply makes it."""
    return {
        "key": draw(st.one_of(HEX_KEY, ID)),
        "query_id": draw(ID),
        "doc_id": draw(ID),
        "grade": draw(st.integers(0, 3)),
        "reason": draw(st.one_of(st.none(), TEXT, SEAMS)),
        "distribution": draw(
            st.one_of(st.none(), st.lists(st.floats(0, 1), min_size=4, max_size=4))
        ),
        "expected_grade": draw(st.none() | FLOAT),
        "usage": Usage(
            prompt_tokens=draw(st.integers(0, 10**6)),
            completion_tokens=draw(st.integers(0, 10**4)),
            cached_tokens=draw(st.integers(0, 10**6)),
        ),
        "cost": draw(st.none() | FLOAT),
        "truncated": draw(st.booleans()),
        "judge": draw(ID),
        "prompt": draw(
            st.none() | st.builds(PromptRef, name=ID, version=ID, sha256=st.just("cd" * 32))
        ),
        "attempts": draw(st.integers(0, 9)),
        "created_at": draw(st.datetimes(timezones=st.just(UTC))),
    }


def _ok_row(store: Store, fields: dict[str, Any], fingerprint: dict[str, Any]) -> Any:
    """The row of an ok judgment made as an import's workers make it (`BatchReplies.ok_row`):
    some fields by name in a dict, the others left to the model's defaults."""
    named = {k: v for k, v in fields.items() if k not in ("judge", "prompt")}
    source = store.source_for(fields["judge"], fields["prompt"], fingerprint)
    return store.stored_row({**named, "status": "ok"}, source)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(ok_fields(), st.sampled_from([(), ("fits",), ("sk-secret",)]))
def test_an_ok_row_made_without_the_model_is_the_models_row(
    fields: dict[str, Any], secrets: tuple[str, ...]
) -> None:
    fingerprint = {"model": "m1", "temperature": 0}
    judgment = Judgment(status="ok", **fields)
    with Store(":memory:", secrets=secrets) as store:
        row = _ok_row(store, fields, fingerprint)
        [expected] = store.stored_rows([(judgment, fingerprint)])
    assert row == expected
    assert not any(s in row.columns[6] for s in secrets)  # masked as the model's row is


def test_an_ok_row_with_a_secret_in_its_reason_is_masked(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db", secrets=["sk-secret"]) as store:
        fields: dict[str, Any] = {
            "key": "sha256:" + "e" * 64,
            "query_id": "q1",
            "doc_id": "d1",
            "grade": 2,
            "reason": "the key sk-secret leaked",
            "usage": Usage(),
            "judge": "llm:m1",
            "prompt": None,
            "created_at": datetime(2026, 1, 2, tzinfo=UTC),
        }
        row = _ok_row(store, fields, {"model": "m1"})
        assert store.write_stored_parts([[row]])[0] == 1
        (got,) = store.get_many([fields["key"]]).values()
        assert got.reason == "the key [redacted] leaked"
        fingerprint = {"model": "m1"}
        first = store.source_for("llm:m1", None, fingerprint)
        assert store.source_for("llm:m1", None, fingerprint) is first  # made once
        assert store.source_for("llm:m2", None, fingerprint).judge == "llm:m2"
        secret_fp = {"model": "m1", "api_base": "https://x/sk-later"}
        assert "sk-later" in str(store.source_for("llm:m1", None, secret_fp).fingerprint)
        store.add_secrets(["sk-later"])  # known only after opening: masked from then on
        assert "sk-later" not in str(store.source_for("llm:m1", None, secret_fp).fingerprint)


@pytest.mark.parametrize("version", quick_first([8, 9, 7, 2], 2))
def test_an_old_store_folds_into_one_payload_and_reads_back_equal_json(
    tmp_path: Path, version: int
) -> None:
    """Schema 8's parts (and older stores' whole JSON) become the payload the encoder writes."""
    files = write_grade_files(tmp_path, n_queries=2, depth=3)
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    assert main(files.args("--judge", "lexical", "--store", new, "--quiet")) == 0
    failed = Judgment(
        query_id="q9",
        doc_id="d9",
        status="failed",
        judge="llm:m1",
        key="sha256:" + "9" * 64,
        error=JudgmentError(type="Timeout", message='no "reply"'),
        judges={"a": None, "b": 2},
        disagreement=0.5,
    )
    with Store(new) as store:
        store.put_many([(failed, {"model": "m1"})])
        expected = {j.key: j for j in stored_judgments(store)}
    write_old_store(old, version, new)
    with Store(old) as store:
        assert store.schema_version == MIGRATIONS[-1].version
        texts = dict(store._conn.execute("SELECT key, judgment FROM judgment_rows"))
        payloads = store._conn.execute("SELECT payload FROM judgments ORDER BY rowid").fetchall()
        got = {j.key: j for j in stored_judgments(store)}
    assert texts.keys() == expected.keys() and len(expected) == 7
    assert all(_equal_as_json(texts[k], j) for k, j in expected.items())
    assert got == expected
    # what the encoder writes of the same judgment, but a folded payload keeps its nulls
    folded = [_without_nulls(p) for (p,) in payloads]
    written = [json.loads(encode(vars(j))[6]) for j in expected.values()]
    assert sorted(map(json.dumps, folded)) == sorted(map(json.dumps, written))
    with sqlite3.connect(old) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(judgments)")]
    conn.close()
    assert columns == [
        "key", "query_id", "doc_id", "source_id", "status", "grade", "created_at", "payload"
    ]  # fmt: skip


def test_the_view_is_made_when_the_store_opens(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as store:
        store.put_many([(Judgment(**_OK), None)])
    with sqlite3.connect(path) as conn:
        conn.execute("DROP VIEW judgment_rows")
        conn.execute("CREATE VIEW judgment_rows AS SELECT 'stale' AS judgment")
    conn.close()
    with Store(path) as store:
        (text,) = store._conn.execute("SELECT judgment FROM judgment_rows").fetchone()
        assert view_is_current(store._conn)
    assert _equal_as_json(text, Judgment(**_OK))


_OK: dict[str, Any] = {
    "query_id": "q1",
    "doc_id": "d1",
    "grade": 3,
    "status": "ok",
    "judge": "lexical",
    "key": "sha256:" + "a" * 64,
    "created_at": datetime(2026, 3, 4, tzinfo=UTC),
}
