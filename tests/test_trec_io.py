"""TREC run and qrels readers and writers: ranks, errors a person can act on, atomic writes."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path
from typing import IO

import pandas as pd
import pytest

from grader.errors import InputError
from grader.io.trec import read_qrels, read_run, write_qrels
from tests.helpers.trec import write_run


def _gunzip(path: Path) -> bytes:
    with gzip.open(path) as fh:
        return fh.read()


def _write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_run_ranks_follow_trec_eval_not_the_file(tmp_path: Path) -> None:
    run = _write(
        tmp_path / "r.txt",
        "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 c 3 2.0 t\n\nq2 Q0 NA 7 0.5 t\n",
    )
    frame = read_run(run)
    assert list(frame.columns) == ["query_id", "doc_id", "score", "rank"]
    assert list(zip(frame["query_id"], frame["doc_id"], frame["rank"], strict=True)) == [
        ("q1", "c", 1),
        ("q1", "b", 2),  # tie on 1.0: doc id descending
        ("q1", "a", 3),
        ("q2", "NA", 1),  # "NA" is an id, not a missing value
    ]
    assert frame.attrs["tag"] == "t"


def test_float32_ties_unless_float64(tmp_path: Path) -> None:
    run = _write(tmp_path / "r.txt", "q Q0 a 1 1.000000001 t\nq Q0 b 2 1.0 t\n")
    assert list(read_run(run)["doc_id"]) == ["b", "a"]
    assert list(read_run(run, precision="float64")["doc_id"]) == ["a", "b"]


def test_unsorted_and_interleaved_runs_and_any_whitespace(tmp_path: Path) -> None:
    run = _write(tmp_path / "r.txt", "q2\tQ0\tx 1 0.1 t\nq1  Q0 a 1 0.2 t\nq2 Q0 y 2 0.9 t\n")
    frame = read_run(run)
    assert frame.groupby("query_id")["rank"].apply(list).to_dict() == {"q1": [1], "q2": [1, 2]}
    assert list(frame.loc[frame["query_id"] == "q2", "doc_id"]) == ["y", "x"]


def test_gz_reads_and_writes_transparently(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "q.txt.gz", "wt") as fh:
        fh.write("q1 0 a 3\nq1 0 b 0\n")
    qrels = read_qrels(tmp_path / "q.txt.gz")
    assert qrels["grade"].tolist() == [3, 0]
    write_qrels(tmp_path / "out.txt.gz", qrels)
    assert _gunzip(tmp_path / "out.txt.gz") == b"q1 0 a 3\nq1 0 b 0\n"
    one = pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [2.5]})
    write_run(tmp_path / "run.gz", one, "x")
    assert _gunzip(tmp_path / "run.gz") == b"q Q0 d 1 2.5 x\n"


def test_written_run_reads_back_identically(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"query_id": ["q1", "q1", "q2"], "doc_id": ["b", "a", "c"], "score": [1.0, 1.0, 3.25]}
    )
    write_run(tmp_path / "r.txt", frame, "mine")
    back = read_run(tmp_path / "r.txt")
    assert back[["query_id", "doc_id", "rank"]].values.tolist() == [
        ["q1", "b", 1],
        ["q1", "a", 2],
        ["q2", "c", 1],
    ]
    assert (tmp_path / "r.txt").read_text().splitlines()[0] == "q1 Q0 b 1 1.0 mine"


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 high t\n", 2, "not a finite number"),
        ("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 nan t\n", 2, "not a finite number"),
        ("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 1.0\n", 2, "expected 6 columns"),
        ("q1 Q0 a 1 1.0\n", 1, "expected 6 columns"),
        ("q1 Q0 a 1 1.0 t x\n\nq1 Q0 b 1.0 t\n", 3, "expected 6 columns"),
    ],
)
def test_malformed_run_lines_name_file_and_line(
    tmp_path: Path, text: str, line: int, what: str
) -> None:
    path = _write(tmp_path / "bad.run", text)
    with pytest.raises(InputError, match=what) as info:
        read_run(path)
    assert info.value.path == str(path)
    assert info.value.line == line
    assert info.value.hint


def test_duplicate_pairs_name_both_lines(tmp_path: Path) -> None:
    run = _write(tmp_path / "r.txt", "q1 Q0 a 1 3 t\nq1 Q0 b 2 2 t\nq2 Q0 a 1 1 t\nq1 Q0 a 3 1 t\n")
    with pytest.raises(InputError, match="lines 1 and 4") as info:
        read_run(run)
    assert "'a'" in str(info.value) and "'q1'" in str(info.value)
    qrels = _write(tmp_path / "q.txt", "q1 0 a 1\nq1 0 a 2\n")
    with pytest.raises(InputError, match="lines 1 and 2"):
        read_qrels(qrels)


def test_grades_outside_0_to_3_fail_unless_clamped(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.txt", "q1 0 a 3\nq1 0 b 4\nq1 0 c -1\n")
    with pytest.raises(InputError, match=r"outside 0\.\.3") as info:
        read_qrels(path)
    assert info.value.line == 2 and "clamp=True" in str(info.value)
    clamped = read_qrels(path, clamp=True)
    assert clamped["grade"].tolist() == [3, 3, 0]
    assert clamped.attrs["clamped"] == 2


def test_huge_grade_is_checked_and_clamped_as_written(tmp_path: Path) -> None:
    """A grade past int64 is never wrapped around to INT64_MIN (error shows it as written)."""
    huge = "99999999999999999999"
    path = _write(tmp_path / "q.txt", f"q1 0 a 1\nq1 0 b {huge}\nq1 0 c -{huge}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InputError, match=rf"grade {huge} is outside 0\.\.3") as info:
            read_qrels(path)
        assert info.value.line == 2
        clamped = read_qrels(path, clamp=True)
    assert clamped["grade"].tolist() == [1, 3, 0]
    assert clamped.attrs["clamped"] == 2


def test_non_integer_grade_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not an integer") as info:
        read_qrels(_write(tmp_path / "q.txt", "q1 0 a 1\nq1 0 b 1.5\n"))
    assert info.value.line == 2


def test_non_utf8_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.txt", b"q1 Q0 a 1 1 t\nq1 Q0 \xff\xfe 2 0.5 t\n")
    with pytest.raises(InputError, match="UTF-8") as info:
        read_run(path)
    assert info.value.line == 2


def test_missing_file_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        read_run(tmp_path / "nope.txt")
    assert read_run(_write(tmp_path / "empty.txt", "")).empty
    assert read_qrels(_write(tmp_path / "empty.qrels", "")).empty


def test_atomic_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.qrels"
    target.write_text("old 0 d 1\n")
    bad = pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["a", "b"], "grade": [1, None]})
    with pytest.raises(InputError):
        write_qrels(target, bad)
    assert target.read_text() == "old 0 d 1\n"
    with pytest.raises(InputError, match=r"in 0\.\.3"):
        write_qrels(target, pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "grade": [4]}))
    spaced = pd.DataFrame({"query_id": ["q 1"], "doc_id": ["a"], "grade": [1]})
    with pytest.raises(InputError, match="whitespace"):
        write_qrels(target, spaced)

    def crash(self: pd.DataFrame, fh: IO[str], *args: object, **kwargs: object) -> None:
        fh.write("q1 0 half")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", crash)
    good = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "grade": [1]})
    with pytest.raises(OSError, match="disk full"):
        write_qrels(target, good)
    assert target.read_text() == "old 0 d 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.qrels"]


@pytest.mark.parametrize(
    "ids",
    [
        ["d1", "d2", "d10", "D1", "d1 ".strip(), "é", "e"],  # even lengths: by-position hash
        ["a", "b" * 40, "a" * 39 + "b", "b" * 39 + "a", "c", "ab"],  # uneven: polynomial hash
    ],
)
def test_duplicate_detection_on_both_hash_paths(tmp_path: Path, ids: list[str]) -> None:
    unique = list(dict.fromkeys(ids))
    lines = [f"q Q0 {d} {i} {10 - i} t" for i, d in enumerate(unique, 1)]
    path = _write(tmp_path / "ok.run", "\n".join(lines) + "\n")
    assert sorted(read_run(path)["doc_id"]) == sorted(unique)
    clash = _write(tmp_path / "dup.run", "\n".join([*lines, f"q Q0 {unique[-1]} 99 0 t"]) + "\n")
    with pytest.raises(InputError, match=f"lines {len(unique)} and {len(unique) + 1}"):
        read_run(clash)
