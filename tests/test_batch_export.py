"""`batch export`'s faster paths give what the plain way gives: request files equal to
`split_requests` over `request_line(custom_id, judge.build_request(...))` of each new key, with
the same sha256, lines and store rows; an export stopped halfway (Ctrl-C, an error recording its
lines, a failed file write) leaves no temporary file, and no file the store does not list with
all its lines (kill -9 too, which may leave a temporary file). The texts the export makes
(content keys, JSON strings, messages, request lines) are checked in
`tests/test_export_texts.py`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.batch.adapter import LLMBatchJudge, job_config
from grader.batch.files.export_files import export_requests
from grader.batch.files.exports import ExportState, custom_id
from grader.batch.files.request_files import RequestFiles, WrittenFile
from grader.batch.requests import split_requests
from grader.errors import DiskFullError, StoreError
from grader.keys import ContentKeys
from grader.models import Doc, Judgment, PromptRef, Query
from grader.store.store import Store
from tests.helpers.batch_export import batch_judge, export_pairs


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
    return [content for _, content in split_requests(requests.items(), **kw)]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("limits", [(7, 200_000_000), (50_000, 9000), (50_000, 200_000_000)])
def test_files_and_rows_equal_the_plain_way(tmp_path: Path, limits: tuple[int, int]) -> None:
    max_requests, max_bytes = limits
    judge = batch_judge()
    pairs = export_pairs(60)
    db = tmp_path / "x.db"
    stored = ContentKeys(judge.fingerprint()).key(pairs[1][0].text, pairs[1][1].text)
    with Store(db) as store:
        ref = PromptRef(name="p", version="1", sha256="0" * 64)
        old = Judgment(
            query_id="q0", doc_id="d1", grade=2, status="ok", judge="j", prompt=ref, key=stored
        )
        store.put_many([(old, None)])
        summary = export_requests(
            store,
            judge,
            job_config(judge, "passage"),
            iter(pairs),
            tmp_path / "out",
            chunk=6,
            batch_pairs=11,
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
    for i, pair in enumerate(export_pairs(n)):
        if i == at:
            raise KeyboardInterrupt
        yield pair


def _listed_files_are_whole(db: Path, out: Path, *, killed: bool = False) -> int:
    """Every file the store lists exists whole with all its lines recorded; no temporary
    file is left (unless `killed`); how many files are listed."""
    assert killed or not list(out.glob(".*.tmp"))
    listed = _rows(db, "SELECT file_no, path, lines, sha256 FROM export_files")
    for file_no, path, lines, sha in listed:
        data = Path(path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha and data.count(b"\n") == lines
        recorded = _rows(db, f"SELECT COUNT(*) FROM export_lines WHERE file_no = {file_no}")
        assert recorded == [(lines,)]
    # No line is recorded but those of the files listed: none waits in a file no engine sees.
    assert _rows(db, "SELECT COUNT(*) FROM export_lines") == [(sum(n for _, _, n, _ in listed),)]
    names = {Path(p).name for _, p, _, _ in listed}
    assert {p.name for p in out.glob("requests-*")} == names
    assert _rows(db, "SELECT complete FROM exports") == [(0,)]
    return len(listed)


FILES_OF_20: dict[str, Any] = {"max_requests": 20, "chunk": 5, "batch_pairs": 20}
"""Export limits that write files of 20 lines, recorded every 20 pairs."""


def _stopped_export(
    tmp_path: Path,
    pairs: Iterable[tuple[Query, Doc]],
    error: type[BaseException],
    match: str | None = None,
    **kw: Any,
) -> int:
    """Run an export of `pairs` into a new store that stops with `error` (its text matching
    `match`; `kw`: the export's limits); how many files the store lists,
    each checked whole."""
    judge = batch_judge()
    db, out = tmp_path / "x.db", tmp_path / "out"
    with Store(db) as store, pytest.raises(error, match=match):
        export_requests(store, judge, job_config(judge, "passage"), pairs, out, **kw)
    return _listed_files_are_whole(db, out)


def test_an_interrupted_export_leaves_only_whole_recorded_files(tmp_path: Path) -> None:
    listed = _stopped_export(
        tmp_path,
        _interrupted(200, at=150),
        KeyboardInterrupt,
        max_requests=20,
        chunk=7,
        batch_pairs=30,
    )
    # Chunks of 7: the 21 before the interrupt were written, and every file closed by
    # then is published (an interrupted export keeps the files whose lines it recorded).
    maker = ContentKeys(batch_judge().fingerprint())
    lines = len({maker.key(q.text, d.text) for q, d in export_pairs(200)[:147]})
    assert listed == (lines - 1) // 20 == 5


def test_an_error_recording_a_files_lines_is_raised_and_abandons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording the second file's lines (with its listing, in one transaction) fails: the
    error is raised, the file published before it stays listed whole, and not one line of
    the others is recorded; their files are removed."""
    calls = {"n": 0}
    real_add = ExportState.add_lines

    def add_lines(self: ExportState, *args: Any, **kwargs: Any) -> None:
        if (args[3] if len(args) > 3 else kwargs.get("file")) is not None:  # lists a file
            calls["n"] += 1
            if calls["n"] == 2:
                raise StoreError("disk full (test)")
        real_add(self, *args, **kwargs)

    monkeypatch.setattr(ExportState, "add_lines", add_lines)
    listed = _stopped_export(
        tmp_path,
        export_pairs(300),
        StoreError,
        "disk full",
        max_requests=25,
        chunk=5,
        batch_pairs=20,
    )
    assert listed == 1  # the file published before the failing write


def test_a_failed_file_write_stops_the_export_with_only_whole_files_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the third file fails with another error than a full disk: it is raised, and
    the store lists the two files written whole before it, with all their lines; no temporary
    file is left. (A full disk drops the whole export: tests/test_hostile_files.py.)"""
    real = RequestFiles._open

    def open_file(self: RequestFiles, path: Path) -> Any:
        if path.name.endswith("-00003.jsonl.tmp"):
            raise OSError(5, "Input/output error (test)")
        return real(self, path)

    monkeypatch.setattr(RequestFiles, "_open", open_file)
    listed = _stopped_export(tmp_path, export_pairs(300), OSError, "Input/output", **FILES_OF_20)
    assert listed == 2


def test_a_full_disk_drops_the_whole_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the third file finds the disk full: DiskFullError, the two files written
    whole are removed with the rest, and the store lists nothing of the export."""
    real = RequestFiles._open

    def open_file(self: RequestFiles, path: Path) -> Any:
        if path.name.endswith("-00003.jsonl.tmp"):
            raise OSError(28, "No space left on device (test)")
        return real(self, path)

    monkeypatch.setattr(RequestFiles, "_open", open_file)
    judge = batch_judge()
    db, out = tmp_path / "x.db", tmp_path / "out"
    with Store(db) as store, pytest.raises(DiskFullError, match="no room"):
        config = job_config(judge, "passage")
        export_requests(store, judge, config, export_pairs(300), out, **FILES_OF_20)
    assert list(out.iterdir()) == []
    for table in ("exports", "export_files", "export_lines"):
        assert _rows(db, f"SELECT COUNT(*) FROM {table}") == [(0,)]


def test_a_failed_rename_lists_nothing_of_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file is renamed before its listing is committed (another connection does not see it
    listed yet); publishing the second file fails: the error is raised, the listing rolled
    back; the store lists the first file alone, and no file is left under another name."""
    real = WrittenFile.publish
    seen_listed: list[int] = []

    def publish(self: WrittenFile) -> Path:
        listed_now = _rows(tmp_path / "x.db", "SELECT file_no FROM export_files")
        seen_listed.extend(n for (n,) in listed_now if n == self.file_no)
        if self.file_no == 2:
            raise PermissionError(13, "Permission denied (test)")
        return real(self)

    monkeypatch.setattr(WrittenFile, "publish", publish)
    listed = _stopped_export(
        tmp_path, export_pairs(300), PermissionError, "Permission denied", **FILES_OF_20
    )
    assert listed == 1
    assert seen_listed == []  # no file was listed before its rename


def test_a_file_that_cannot_be_written_is_raised_and_abandon_removes_the_open_one(
    tmp_path: Path,
) -> None:
    files = RequestFiles(tmp_path, "e1", 3, 10_000)
    (tmp_path / ".requests-e1-00002.jsonl.tmp").mkdir()  # the second file cannot be opened
    with pytest.raises(IsADirectoryError):
        for _ in range(4):
            files.add(b'{"a": 1}\n')
    assert [w.file_no for w in files.take_written()] == [1]
    files.add(b'{"a": 1}\n')  # file 3 is opened on the next line
    files.abandon()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".requests-e1-00001.jsonl.tmp",
        ".requests-e1-00002.jsonl.tmp",
    ]


def test_written_files_are_whole_and_published_by_name(tmp_path: Path) -> None:
    files = RequestFiles(tmp_path, "e1", 3, 10_000)
    lines = [b'{"n": %d}\n' % i for i in range(7)]
    places = [files.add(line) for line in lines]
    assert places == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1)]
    files.close()
    written = files.take_written()
    assert [(w.file_no, w.lines) for w in written] == [(1, 3), (2, 3), (3, 1)]
    assert not list(tmp_path.glob("requests-*"))  # nothing is published by the writer
    for w, data in zip(written, [b"".join(lines[:3]), b"".join(lines[3:6]), lines[6]], strict=True):
        assert (w.size, w.sha256()) == (len(data), hashlib.sha256(data).hexdigest())
        assert w.publish().read_bytes() == data
        assert w.final.name == f"requests-e1-{w.file_no:05d}.jsonl"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_written_file_changed_on_disk_is_refused_before_it_is_published(
    tmp_path: Path,
) -> None:
    files = RequestFiles(tmp_path, "e1", 5, 10_000)
    files.add(b'{"n": 1}\n')
    files.close()
    (written,) = files.take_written()
    with open(tmp_path / ".requests-e1-00001.jsonl.tmp", "ab") as fh:
        fh.write(b"more\n")
    with pytest.raises(OSError, match="14 bytes on disk, 9 written"):
        written.sha256()


_KILLED_EXPORT = """
import sys, time
from pathlib import Path
from grader.batch.files import request_files
from grader.batch.files.export_files import export_requests
from grader.batch.adapter import job_config
from grader.store.store import Store
from tests.helpers.batch_export import batch_judge, export_pairs

request_files.BLOCK_BYTES = 4096  # the open file is on disk, in part, when the kill comes

def slow_pairs():
    for i, pair in enumerate(export_pairs(100_000)):
        if i % 50 == 0:
            time.sleep(0.01)
        yield pair

judge = batch_judge()
with Store(sys.argv[1]) as store:
    export_requests(store, judge, job_config(judge, "passage"), slow_pairs(), Path(sys.argv[2]),
                    max_requests=300, chunk=100, batch_pairs=200)
"""


def _open_bytes(out: Path) -> int:
    """Bytes written so far to the export's files under their temporary names."""
    total = 0
    for path in out.glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):  # published meanwhile
            total += path.stat().st_size
    return total


@pytest.mark.slow
def test_sigkill_of_the_export_leaves_only_whole_files_listed(tmp_path: Path) -> None:
    """kill -9 of the exporting process while it writes a request file: the store lists only
    files written whole with all their lines, under their final names; the file being written
    keeps its temporary name, which no engine reads."""
    db, out = tmp_path / "x.db", tmp_path / "out"
    cmd = [sys.executable, "-c", _KILLED_EXPORT, str(db), str(out)]
    export = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[1])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        len(list(out.glob("requests-*"))) < 2 or not list(out.glob(".*.tmp"))
    ):
        time.sleep(0.01)
    # Then wait for the open file to grow: the export is past publishing the second file
    # (the open file's first blocks are written before it) and writes the third.
    seen = _open_bytes(out)
    while time.monotonic() < deadline and _open_bytes(out) <= seen:
        time.sleep(0.01)
    export.send_signal(signal.SIGKILL)
    export.wait()
    assert export.returncode == -signal.SIGKILL
    assert _listed_files_are_whole(db, out, killed=True) >= 2
