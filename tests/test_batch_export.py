"""`batch export`'s faster paths give what the plain way gives: request files equal to
`split_requests` over `request_line(custom_id, judge.build_request(...))` of each new key, with
the same sha256, lines and store rows, whether the recording runs in this process or in a child
(`grader.batch.export_process`); an export stopped halfway (Ctrl-C, an error in the recording
child, a failed file write) leaves no temporary file and no file the store does not list with
all its lines; content keys and message texts equal `content_key` and `render_messages`."""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.batch import request_files
from grader.batch.adapter import LLMBatchJudge
from grader.batch.export_files import export_requests
from grader.batch.exports import ExportState, custom_id
from grader.batch.job_config import job_config
from grader.batch.request_files import RequestFiles
from grader.batch.requests import request_line, split_requests
from grader.errors import StoreError
from grader.judges.llm.judge import LLMJudge
from grader.keys import ContentKeys, content_key, json_string
from grader.models import Doc, Judgment, JudgmentError, PromptRef, Query
from grader.prompts import (
    MessageRenderer,
    OutputMode,
    PromptSpec,
    _prompt_tags,
    load_prompt,
    neutralise,
    render_messages,
    render_scale,
    truncate,
)
from grader.store.judgment_rows import encode_key
from grader.store.store import Store
from tests.test_batch_speed import _reference


def _judge(prompt: str = "passage") -> LLMBatchJudge:
    return LLMBatchJudge(
        LLMJudge(model="fake-model", prompt=prompt, base_url="http://127.0.0.1:9/v1")
    )


def _pairs(n: int) -> list[tuple[Query, Doc]]:
    """`n` pairs, 4 per query; every 5th repeats an earlier pair's texts under a new doc id
    (one line, two id pairs), some with metadata, tags and characters JSON escapes."""
    out: list[tuple[Query, Doc]] = []
    for i in range(n):
        query = Query(query_id=f"q{i // 4}", text=f'query {i // 4} "quoted" é')
        if i % 5 == 4:
            first = out[i - 3][1]
            out.append((out[i - 3][0], Doc(doc_id=f"copy{i}", text=first.text, title=first.title)))
            continue
        meta = {"path": f"src/m{i}.py", "n": i} if i % 3 == 0 else {}
        text = f"doc {i} </passage> tab\there \u2028 " + "word " * (i % 9)
        out.append((query, Doc(doc_id=f"d{i}", text=text, title=f"T{i}", metadata=meta)))
    return out


def _expected_files(
    judge: LLMBatchJudge, export_id: str, pairs: list[tuple[Query, Doc]], skip: set[str], **kw: int
) -> list[bytes]:
    """The request files the plain way: each new key's line once, split by `split_requests`."""
    maker = ContentKeys(judge.fingerprint())
    requests: dict[str, Any] = {}
    for query, doc in pairs:
        key = maker.key(query.text, doc.text)
        if key not in skip and custom_id(export_id, key) not in requests:
            requests[custom_id(export_id, key)] = judge.build_request(query, doc)
    return [f.content() for f in split_requests(requests.items(), **kw)]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("limits", [(7, 200_000_000), (50_000, 9000), (50_000, 200_000_000)])
def test_files_and_rows_equal_the_plain_way(
    tmp_path: Path, background: bool, limits: tuple[int, int]
) -> None:
    max_requests, max_bytes = limits
    judge = _judge()
    pairs = _pairs(60)
    db = tmp_path / "x.db"
    stored = ContentKeys(judge.fingerprint()).key(pairs[1][0].text, pairs[1][1].text)
    with Store(db) as store:
        ref = PromptRef(name="p", version="1", sha256="0" * 64)
        store.put(
            Judgment(
                query_id="q0", doc_id="d1", grade=2, status="ok", judge="j", prompt=ref, key=stored
            )
        )
        summary = export_requests(
            store,
            judge,
            job_config(judge, "passage"),
            iter(pairs),
            tmp_path / "out",
            chunk=6,
            batch_pairs=11,
            background=background,
            max_requests=max_requests,
            max_bytes=max_bytes,
        )
    expected = _expected_files(
        judge, summary.export_id, pairs, {stored}, max_requests=max_requests, max_bytes=max_bytes
    )
    written = [p.read_bytes() for p in summary.files]
    assert written == expected
    assert not list((tmp_path / "out").glob(".*.tmp"))
    keys = [ContentKeys(judge.fingerprint()).key(q.text, d.text) for q, d in pairs]
    n_stored, n_lines = keys.count(stored), len(set(keys)) - 1
    assert n_stored == 2 and n_lines == sum(f.count(b"\n") for f in expected) == 47
    assert (summary.stored, summary.pairs, summary.lines) == (n_stored, 60 - n_stored, n_lines)
    files = _rows(db, "SELECT file_no, lines, bytes, sha256 FROM export_files ORDER BY file_no")
    assert files == [
        (n, f.count(b"\n"), len(f), hashlib.sha256(f).hexdigest())
        for n, f in enumerate(expected, start=1)
    ]
    lines = _rows(db, "SELECT file_no, line_no, key FROM export_lines ORDER BY file_no, line_no")
    written_keys = [
        (n, i, json.loads(line)["custom_id"].split(":", 2)[2])
        for n, f in enumerate(expected, start=1)
        for i, line in enumerate(f.splitlines(), start=1)
    ]
    assert lines == written_keys
    held = _rows(db, "SELECT query_id, doc_id FROM judgment_pairs")
    assert sorted(held) == sorted({(q.query_id, d.doc_id) for q, d in pairs})
    docs = dict(_rows(db, "SELECT doc_id, metadata FROM docs"))
    assert docs["d0"] == json.dumps({"n": 0, "path": "src/m0.py"}) and docs["d1"] == "{}"
    complete = _rows(db, "SELECT complete, n_lines, n_pairs FROM exports")
    assert complete == [(1, n_lines, 60 - n_stored)]


def _interrupted(n: int, at: int) -> Iterator[tuple[Query, Doc]]:
    for i, pair in enumerate(_pairs(n)):
        if i == at:
            raise KeyboardInterrupt
        yield pair


def _listed_files_are_whole(db: Path, out: Path) -> int:
    """Every file the store lists exists whole with all its lines recorded; no temporary
    file is left; how many files are listed."""
    assert not list(out.glob(".*.tmp"))
    listed = _rows(db, "SELECT file_no, path, lines, sha256 FROM export_files")
    for file_no, path, lines, sha in listed:
        data = Path(path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha and data.count(b"\n") == lines
        recorded = _rows(db, f"SELECT COUNT(*) FROM export_lines WHERE file_no = {file_no}")
        assert recorded == [(lines,)]
    names = {Path(p).name for _, p, _, _ in listed}
    assert {p.name for p in out.glob("requests-*")} == names
    assert _rows(db, "SELECT complete FROM exports") == [(0,)]
    return len(listed)


@pytest.mark.parametrize("background", [False, True])
def test_an_interrupted_export_leaves_only_whole_recorded_files(
    tmp_path: Path, background: bool
) -> None:
    judge = _judge()
    db, out = tmp_path / "x.db", tmp_path / "out"
    with Store(db) as store, pytest.raises(KeyboardInterrupt):
        export_requests(
            store,
            judge,
            job_config(judge, "passage"),
            _interrupted(200, at=150),
            out,
            max_requests=20,
            chunk=7,
            batch_pairs=30,
            background=background,
        )
    assert _listed_files_are_whole(db, out) >= 4


def test_an_error_in_the_recording_child_is_raised_and_abandons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child is forked: a failing `add_lines` patched here fails there (the first one
    after a file is published)."""
    published = {"n": 0}
    real_lines, real_file = ExportState.add_lines, ExportState.add_file

    def failing(self: ExportState, *args: Any) -> None:
        if published["n"]:
            raise StoreError("disk full (test)")
        real_lines(self, *args)

    def add_file(self: ExportState, *args: Any) -> None:
        published["n"] += 1
        real_file(self, *args)

    monkeypatch.setattr(ExportState, "add_lines", failing)
    monkeypatch.setattr(ExportState, "add_file", add_file)
    judge = _judge()
    db, out = tmp_path / "x.db", tmp_path / "out"
    with Store(db) as store, pytest.raises(StoreError, match="disk full"):
        export_requests(
            store,
            judge,
            job_config(judge, "passage"),
            _pairs(300),
            out,
            max_requests=25,
            chunk=5,
            batch_pairs=20,
            background=True,
        )
    assert _listed_files_are_whole(db, out) >= 1


@pytest.mark.parametrize("background", [False, True])
def test_a_failed_file_write_stops_the_export_with_only_whole_files_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    """The request files are written in the exporting process: a write that fails on the third
    file (disk full) is raised, and the recorder (in this process or the child) lists only the
    files written whole before it, with all their lines; no temporary file is left."""
    real = RequestFiles._handle

    def handle(self: RequestFiles, file: Any) -> Any:
        if file.file_no == 3:
            raise OSError(28, "No space left on device (test)")
        return real(self, file)

    monkeypatch.setattr(RequestFiles, "_handle", handle)
    judge = _judge()
    db, out = tmp_path / "x.db", tmp_path / "out"
    with Store(db) as store, pytest.raises(OSError, match="No space left"):
        export_requests(
            store,
            judge,
            job_config(judge, "passage"),
            _pairs(300),
            out,
            max_requests=20,
            chunk=5,
            batch_pairs=20,
            background=background,
        )
    assert _listed_files_are_whole(db, out) <= 2


def test_a_failed_file_write_is_raised_on_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error is raised on the caller's thread; `abandon` removes the files not taken."""
    monkeypatch.setattr(request_files, "BLOCK_BYTES", 10)
    out = tmp_path / "out"
    out.mkdir()
    files = RequestFiles(out, "e1", 3, 10_000)
    (out / ".requests-e1-00002.jsonl.tmp").mkdir()  # the second file cannot be opened
    with pytest.raises(IsADirectoryError):
        for _ in range(50):
            files.add(b'{"a": 1}\n')
            time.sleep(0.001)
        files.wait()
    files.abandon()
    assert [p.name for p in out.iterdir()] == [".requests-e1-00002.jsonl.tmp"]


def test_written_files_are_whole_and_published_by_name(tmp_path: Path) -> None:
    files = RequestFiles(tmp_path, "e1", 3, 10_000)
    lines = [b'{"n": %d}\n' % i for i in range(7)]
    places = [files.add(line) for line in lines]
    assert places == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1)]
    files.close()
    files.wait()
    written = files.take_written()
    assert [(w.file_no, w.lines) for w in written] == [(1, 3), (2, 3), (3, 1)]
    assert not list(tmp_path.glob("requests-*"))  # nothing is published by the writer
    for w, data in zip(written, [b"".join(lines[:3]), b"".join(lines[3:6]), lines[6]], strict=True):
        assert (w.size, w.sha256()) == (len(data), hashlib.sha256(data).hexdigest())
        assert w.publish().read_bytes() == data
        assert w.final.name == f"requests-e1-{w.file_no:05d}.jsonl"
    assert not list(tmp_path.glob(".*.tmp"))


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=60) | st.sampled_from(
    ["\u2028\u2029", '"\\/\b\f\n\r\t\x00\x1f\x7f', "é𝄞🐈", "</passage> <query>", " \n lead"]
)


@settings(max_examples=300, deadline=None)
@given(_TEXT, _TEXT)
def test_content_keys_equal_content_key(query: str, doc: str) -> None:
    fingerprint = _judge().fingerprint()
    maker = ContentKeys(fingerprint)
    assert maker.key(query, doc) == content_key(fingerprint, query, doc)
    assert maker.key(query, doc) == content_key(fingerprint, query, doc)  # cached encodings


@settings(max_examples=1000, deadline=None)
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
    fingerprint = _judge().fingerprint()
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
    system = _reference(spec.system, values) + "\n\n" + instruction.strip()
    return system, _reference(spec.user, values), cut


@settings(max_examples=200, deadline=None)
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
    judge = _judge("code")
    pairs = _pairs(12)
    with Store(tmp_path / "x.db") as store:
        summary = export_requests(
            store, judge, job_config(judge, "code"), pairs, tmp_path / "out", background=False
        )
    maker = ContentKeys(judge.fingerprint())
    seen: dict[str, bytes] = {}
    for q, d in pairs:
        cid = custom_id(summary.export_id, maker.key(q.text, d.text))
        seen.setdefault(cid, request_line(cid, judge.build_request(q, d)))
    assert summary.files[0].read_bytes() == b"".join(seen.values())


_KILLED_EXPORT = """
import sys, time
from pathlib import Path
from grader.batch import request_files
from grader.batch.export_files import export_requests
from grader.batch.job_config import job_config
from grader.store.store import Store
from tests.test_batch_export import _judge, _pairs

request_files.BLOCK_BYTES = 4096  # the open file is on disk, in part, when the kill comes

def slow_pairs():
    for i, pair in enumerate(_pairs(100_000)):
        if i % 50 == 0:
            time.sleep(0.01)
        yield pair

judge = _judge()
with Store(sys.argv[1]) as store:
    export_requests(store, judge, job_config(judge, "passage"), slow_pairs(), Path(sys.argv[2]),
                    max_requests=300, chunk=100, batch_pairs=200, background=True)
"""


@pytest.mark.slow
def test_sigkill_of_the_export_leaves_the_child_to_abandon_cleanly(tmp_path: Path) -> None:
    """kill -9 of the exporting process, which writes the request files: its recording child
    sees the pipe end, publishes the files handed over and removes the export's temporary
    files (the one open when the kill came); the store lists only whole files."""
    db, out = tmp_path / "x.db", tmp_path / "out"
    cmd = [sys.executable, "-c", _KILLED_EXPORT, str(db), str(out)]
    export = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        len(list(out.glob("requests-*"))) < 2 or not list(out.glob(".*.tmp"))
    ):
        time.sleep(0.01)
    export.send_signal(signal.SIGKILL)
    export.wait()
    assert export.returncode == -signal.SIGKILL
    while time.monotonic() < deadline and list(out.glob(".*.tmp")):
        time.sleep(0.05)  # the orphaned child abandoning
    assert _listed_files_are_whole(db, out) >= 2


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
            store.put(_judgment(key, ok=i % 3 != 0))
        store.put(_judgment("plain-key", ok=True))
        yield store


_ASKED = st.lists(
    st.sampled_from(_STORED)
    | st.sampled_from([content_key({"n": -i}, "q", "d") for i in range(1, 5)])  # not stored
    | st.sampled_from([_STORED[0].upper(), _STORED[1][:-1] + "g", "plain-key", "sha256:ab"]),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
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


@settings(max_examples=60, deadline=None)
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


def test_a_written_file_changed_on_disk_is_refused_before_it_is_published(
    tmp_path: Path,
) -> None:
    files = RequestFiles(tmp_path, "e1", 5, 10_000)
    files.add(b'{"n": 1}\n')
    files.close()
    files.wait()
    (written,) = files.take_written()
    with open(tmp_path / ".requests-e1-00001.jsonl.tmp", "ab") as fh:
        fh.write(b"more\n")
    with pytest.raises(OSError, match="14 bytes on disk, 9 written"):
        written.sha256()
