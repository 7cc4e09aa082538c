"""The grades one person gave a sample: an append-only JSONL file beside it, one line per grade.

`SAMPLE.<annotator>.grades.jsonl` gets one line per click, written and fsynced before the page is
told it is saved, so a crash loses nothing. Reading takes the latest grade per pair, so changing
one's mind is just another line. Each annotator has their own file, which lets calibration
compare two people on the same sample.
"""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path

from grader.errors import InputError
from grader.io.files import iter_lines
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
    """Append-only grade log of one annotator for one sample; thread-safe appends."""

    def __init__(self, path: str | Path, annotator: str) -> None:
        self.path = Path(path)
        self.annotator = check_annotator(annotator)
        self._lock = threading.Lock()

    def read(self) -> dict[tuple[str, str], int]:
        """(query_id, doc_id) -> latest grade. A torn last line (crash mid-write) is ignored."""
        if not self.path.exists():
            return {}
        lines = list(iter_lines(self.path))
        out: dict[tuple[str, str], int] = {}
        for n, line in lines:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                key = (str(rec["query_id"]), str(rec["doc_id"]))
                grade = rec["grade"]
            except (json.JSONDecodeError, KeyError, TypeError):
                if n == lines[-1][0]:
                    continue
                raise InputError(
                    "not a grade record", path=self.path, line=n, hint="was the file edited?"
                ) from None
            if grade not in GRADES or isinstance(grade, bool):
                raise InputError(f"grade {grade!r} is not one of 0..3", path=self.path, line=n)
            out[key] = grade
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
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self._drop_torn_tail()
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def _drop_torn_tail(self) -> None:
        """Cut a last line left without its newline by a crash mid-write.

        That grade was never confirmed to the page (the reply comes after fsync), so dropping
        it loses nothing that was reported saved.
        """
        if not self.path.exists():
            return
        with open(self.path, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            keep = size
            while keep > 0:
                step = min(4096, keep)
                fh.seek(keep - step)
                block = fh.read(step)
                cut = block.rfind(b"\n")
                if cut >= 0:
                    keep = keep - step + cut + 1
                    break
                keep -= step
            fh.truncate(keep)
