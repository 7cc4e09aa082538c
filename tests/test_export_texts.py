"""The texts and keys a batch export makes or asks for equal the plain way's: content keys
equal `content_key`, `json_string` equals `json.dumps(..., ensure_ascii=False)` in UTF-8,
message texts equal `render_messages` (and the rendering rule written plainly), the export's
request lines equal `request_line(custom_id, judge.build_request(...))`, `Store.statuses`
equals one lookup per key and `put_pairs` stores each key as `encode_key` does."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.batch.adapter import job_config
from grader.batch.files.export_files import export_requests
from grader.batch.files.exports import custom_id
from grader.batch.requests import request_line
from grader.keys import ContentKeys, content_key, json_string
from grader.models import Doc, Judgment, JudgmentError, PromptRef, Query
from grader.prompts import (
    MessageRenderer,
    OutputMode,
    PromptSpec,
    load_prompt,
    render_messages,
    truncate,
)
from grader.prompts.render import _prompt_tags, neutralise, render_scale
from grader.store.judgment_rows import encode_key
from grader.store.store import Store
from tests.helpers.batch_export import batch_judge, export_pairs, reference_render
from tests.helpers.hypothesis_scale import examples

_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=60) | st.sampled_from(
    ["\u2028\u2029", '"\\/\b\f\n\r\t\x00\x1f\x7f', "é𝄞🐈", "</passage> <query>", " \n lead"]
)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(_TEXT, _TEXT)
def test_content_keys_equal_content_key(query: str, doc: str) -> None:
    fingerprint = batch_judge().fingerprint()
    maker = ContentKeys(fingerprint)
    assert maker.key(query, doc) == content_key(fingerprint, query, doc)
    assert maker.key(query, doc) == content_key(fingerprint, query, doc)  # cached encodings


@settings(max_examples=examples(1000), deadline=None)
@given(st.text(st.characters(blacklist_categories=["Cs"]), max_size=80) | _TEXT)
def test_json_string_is_json_dumps_encoded(text: str) -> None:
    assert json_string(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")


def test_json_string_of_every_character_below_0x800() -> None:
    for code in range(0x800):
        if 0xD800 <= code <= 0xDFFF:
            continue
        text = f"a{chr(code)}b"
        assert json_string(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")
    with pytest.raises(UnicodeEncodeError):
        json_string("a\ud800")


def test_a_lone_surrogate_fails_the_key_the_same_way() -> None:
    fingerprint = batch_judge().fingerprint()
    with pytest.raises(UnicodeEncodeError):
        ContentKeys(fingerprint).key("q", "\ud800")
    with pytest.raises(UnicodeEncodeError):
        content_key(fingerprint, "q", "\ud800")


_MODES: tuple[OutputMode, ...] = ("json_schema", "text")
_SPECS = [load_prompt(p) for p in ("passage", "code")]
_RENDERERS = {(spec.name, m): (spec, MessageRenderer(spec, m)) for spec in _SPECS for m in _MODES}


def _plain_contents(
    spec: PromptSpec, mode: OutputMode, query: Query, doc: Doc
) -> tuple[str, str, bool]:
    """The rendering rule written the plain way (string.Template line by line)."""
    tags = _prompt_tags(spec.user, spec.system)
    body, cut = truncate(doc.text.strip("\n"), spec.doc_budget_chars, spec.truncation_marker)
    values = {
        "query": neutralise(query.text.strip(), tags),
        "document": neutralise(body, tags),
        "title": neutralise((doc.title or "").strip(), tags),
        "scale": render_scale(spec),
    }
    for name in ("path", "symbol", "language"):
        raw = doc.metadata.get(name)
        values[name] = "" if raw in (None, "") else neutralise(str(raw).strip(), tags)
    instruction = spec.text_instruction if mode == "text" else spec.json_instruction
    system = reference_render(spec.system, values) + "\n\n" + instruction.strip()
    return system, reference_render(spec.user, values), cut


@settings(max_examples=examples(200), deadline=None)
@given(
    _TEXT,
    _TEXT,
    st.none() | _TEXT,
    st.dictionaries(st.sampled_from(["path", "symbol", "language", "other"]), _TEXT | st.none()),
)
def test_message_renderer_is_the_plain_rule_and_render_messages(
    query: str, doc: str, title: str | None, metadata: dict[str, Any]
) -> None:
    pair = (
        Query(query_id="q", text=query),
        Doc(doc_id="d", text=doc, title=title, metadata=metadata),
    )
    for (_, mode), (spec, renderer) in _RENDERERS.items():
        contents = renderer.contents(*pair)
        assert contents == _plain_contents(spec, mode, *pair)
        messages, cut = render_messages(spec, *pair, mode=mode)
        assert contents == (messages[0]["content"], messages[1]["content"], cut)


def test_request_lines_of_the_export_are_request_line_of_build_request(tmp_path: Path) -> None:
    judge = batch_judge("code")
    pairs = export_pairs(12)
    with Store(tmp_path / "x.db") as store:
        summary = export_requests(store, judge, job_config(judge, "code"), pairs, tmp_path / "out")
    maker = ContentKeys(judge.fingerprint())
    seen: dict[str, bytes] = {}
    for q, d in pairs:
        cid = custom_id(summary.export_id, maker.key(q.text, d.text))
        seen.setdefault(cid, request_line(cid, judge.build_request(q, d)))
    assert summary.files[0].read_bytes() == b"".join(seen.values())


def _judgment(key: str, ok: bool) -> Judgment:
    ref = PromptRef(name="p", version="1", sha256="0" * 64)
    if ok:
        return Judgment(
            query_id="q", doc_id=key[-8:], grade=1, status="ok", judge="j", key=key, prompt=ref
        )
    error = JudgmentError(type="InvalidReply", message="x")
    return Judgment(
        query_id="q", doc_id=key[-8:], status="failed", judge="j", key=key, prompt=ref, error=error
    )


_STORED = [content_key({"n": i}, "q", "d") for i in range(12)]


@pytest.fixture(scope="module")
def status_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with Store(tmp_path_factory.mktemp("statuses") / "s.db") as store:
        for i, key in enumerate(_STORED):
            store.put_many([(_judgment(key, ok=i % 3 != 0), None)])
        store.put_many([(_judgment("plain-key", ok=True), None)])
        yield store


_ASKED = st.lists(
    st.sampled_from(_STORED)
    | st.sampled_from([content_key({"n": -i}, "q", "d") for i in range(1, 5)])  # not stored
    | st.sampled_from([_STORED[0].upper(), _STORED[1][:-1] + "g", "plain-key", "sha256:ab"]),
    max_size=30,
)


@settings(max_examples=examples(150), deadline=None)
@given(_ASKED)
def test_statuses_equal_one_lookup_per_key(status_store: Store, keys: list[str]) -> None:
    conn = sqlite3.connect(status_store.path)
    try:
        expected = {}
        for key in keys:
            row = conn.execute(
                "SELECT status FROM judgments WHERE key = ?", (encode_key(key),)
            ).fetchone()
            if row is not None:
                expected[key] = row[0]
    finally:
        conn.close()
    assert status_store.statuses(iter(keys)) == expected


@settings(max_examples=examples(60), deadline=None)
@given(_ASKED)
def test_put_pairs_stores_each_key_as_encode_key_does(keys: list[str]) -> None:
    rows = [(k, f"q{i}", "d") for i, k in enumerate(keys)]
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "p.db") as store:
        store.put_pairs(rows)
        conn = sqlite3.connect(store.path)
        try:
            held = conn.execute("SELECT key, query_id, doc_id FROM judgment_pairs").fetchall()
        finally:
            conn.close()
    assert sorted(held, key=repr) == sorted({(encode_key(k), q, d) for k, q, d in rows}, key=repr)
