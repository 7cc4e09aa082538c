"""The grades one person gave a sample: `SAMPLE.<annotator>.grades.jsonl`, one fsynced line per
grade, so a crash loses nothing; the latest grade of a pair counts."""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.models import GRADES

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_annotator(name: str) -> str:
    """An annotator name safe inside a file name (letters, digits, `_ . -`)."""
    if not _NAME.match(name):
        raise InputError(
            f"annotator name {name!r} is not usable in a file name",
            hint="use letters, digits, '_', '.', '-' (at most 64)",
        )
    return name


def grade_log_path(sample: str | Path, annotator: str) -> Path:
    """`<folder>/<sample stem>.<annotator>.grades.jsonl`."""
    p = Path(sample)
    stem = p.name.removesuffix(".gz").rsplit(".", 1)[0]
    return p.with_name(f"{stem}.{check_annotator(annotator)}.grades.jsonl")


class GradeLog:
    """Append-only grade log of one annotator for one sample; thread-safe appends. Only the bytes
    appended since the last read are read, so an append costs the same at 0 and 100,000 grades."""

    def __init__(self, path: str | Path, annotator: str) -> None:
        self.path = Path(path)
        self.annotator = check_annotator(annotator)
        self._lock = threading.Lock()
        self._grades: dict[tuple[str, str], int] = {}
        self._file: tuple[int, int] | None = None  # (st_dev, st_ino) of the file indexed
        self._end = 0  # bytes of whole lines indexed
        self._lines = 0  # whole lines indexed
        self.bytes_read = 0

    def read(self) -> dict[tuple[str, str], int]:
        """(query_id, doc_id) -> latest grade. A torn last line (crash mid-write) is ignored."""
        with self._lock:
            tail = self._catch_up()
            out = dict(self._grades)
            record = _record(tail)
            if record is not None:  # complete but for its newline: it counts, as it always did
                out[record[0]] = record[1]
            return out

    def append(self, query_id: str, doc_id: str, grade: int) -> None:
        """Record one grade durably (written, flushed and fsynced before returning)."""
        if grade not in GRADES or isinstance(grade, bool):
            raise InputError(f"grade {grade!r} is not one of 0..3")
        record = {
            "query_id": query_id,
            "doc_id": doc_id,
            "grade": grade,
            "annotator": self.annotator,
            "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            tail = self._catch_up()
            kept = _record(tail)
            if tail.endswith(b"\n"):  # a whole last line that is not a grade record
                raise InputError(
                    "not a grade record",
                    path=self.path,
                    line=self._lines + 1,
                    hint="was the file edited? fix or remove that line",
                )
            if tail and kept is None:
                # A last line left without its newline by a crash mid-write. That grade was never
                # confirmed to the page (the reply comes after fsync): dropping it loses nothing.
                os.truncate(self.path, self._end)
                tail = b""
            elif tail:
                line = b"\n" + line  # a whole record that only lacks its newline: keep it
            expected = self._end + len(tail) + len(line)
            with open(self.path, "ab") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
                at = fh.tell()
                ident = os.fstat(fh.fileno())
            if at != expected or self._file not in (None, (ident.st_dev, ident.st_ino)):
                return  # another writer came in between: the next read indexes both in order
            self._file = (ident.st_dev, ident.st_ino)
            if kept is not None:
                self._grades[kept[0]] = kept[1]
                self._lines += 1
            self._grades[(query_id, doc_id)] = grade
            self._lines += 1
            self._end = at

    def _catch_up(self) -> bytes:
        """Index the whole lines appended since the last call; returns the unterminated tail. A
        corrupt line raises unless it is the last (a crash mid-write): that one is the tail."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._reset(None)
            return b""
        ident = (st.st_dev, st.st_ino)
        if ident != self._file or st.st_size < self._end:
            self._reset(ident)
        if st.st_size == self._end:
            return b""
        with open(self.path, "rb") as fh:
            fh.seek(self._end)
            data = fh.read(st.st_size - self._end)
        self.bytes_read += len(data)
        if self._end == 0 and data.startswith(b"\xef\xbb\xbf"):
            self._end = 3
            data = data[3:]
        cut = data.rfind(b"\n") + 1
        whole, tail = data[:cut], data[cut:]
        pos = 0
        for text in whole.split(b"\n")[:-1]:
            raw = text + b"\n"
            n = self._lines + 1
            pos += len(raw)
            if raw.strip():
                found = _parse(raw)
                if found is None:
                    if tail or pos < len(whole):
                        raise InputError(
                            "not a grade record",
                            path=self.path,
                            line=n,
                            hint="was the file edited?",
                        )
                    return raw  # the last line, torn by a crash: not indexed
                key, grade = found
                if grade not in GRADES or isinstance(grade, bool):
                    raise InputError(f"grade {grade!r} is not one of 0..3", path=self.path, line=n)
                self._grades[key] = grade
            self._end += len(raw)
            self._lines = n
        return tail

    def _reset(self, ident: tuple[int, int] | None) -> None:
        self._grades = {}
        self._file = ident
        self._end = 0
        self._lines = 0


def _parse(raw: bytes) -> tuple[tuple[str, str], Any] | None:
    """The (pair, grade) of a record line, or None when it is not one."""
    try:
        rec = json.loads(raw.decode("utf-8"))
        return (str(rec["query_id"]), str(rec["doc_id"])), rec["grade"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        return None


def _record(tail: bytes) -> tuple[tuple[str, str], int] | None:
    """The grade in an unterminated last line when it is a whole, valid record, else None."""
    found = _parse(tail) if tail.strip() else None
    if found is None or found[1] not in GRADES or isinstance(found[1], bool):
        return None
    return found
