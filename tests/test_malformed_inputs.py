"""Malformed input files end with file:line errors, in bounded memory.

A line longer than the limit (1 MiB for TREC lines, 64 MiB for any other) is an error naming
file and line, found in the first block: `/dev/zero` and a file without newlines fail at once.
A qrels of identical lines names lines 1 and 2. A NUL byte is refused by `grade` and `evaluate`
alike, wherever it is. `evaluate` says when -m took QRELS and RUN as measures, or when the two
are swapped. (bench/bad_input_memory.py measures the memory; tests check the answers.)
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import grader.io.trec as trec
from grader.cli.main import main
from grader.errors import InputError
from grader.evaluation.files import judged_run_file, read_grades
from grader.io.files import iter_lines
from grader.io.streams import TREC_LINE_LIMIT
from grader.io.trec import check_duplicates, query_codes, read_qrels, read_run
from tests.grade_data import write_grade_files
from tests.helpers.params import quick_first

ROOT = Path(__file__).resolve().parents[1]


def _run_lines(n: int, prefix: str = "q") -> list[str]:
    return [f"{prefix}{i // 100} Q0 d{i} {i % 100 + 1} {1000 - i % 100}.5 tag" for i in range(n)]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _qrels(tmp_path: Path) -> Path:
    return _write(tmp_path / "q.qrels", [f"q{i} 0 d{i * 100} 2" for i in range(50)])


def _evaluate_error(qrels: Path, run: Path | str) -> str:
    judged, _ = read_grades(str(qrels), clamp=False)
    with pytest.raises(InputError) as caught:
        judged_run_file(str(run), judged, precision="float32", depth=None)
    return str(caught.value)


# Long lines ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lines", quick_first([0, 5, 150_000], 2))  # first, small, past a block
def test_a_trec_line_over_the_limit_is_named_by_grade_and_evaluate(
    tmp_path: Path, lines: int
) -> None:
    rows = _run_lines(lines + 10)
    rows.insert(lines, "q1 Q0 " + "d" * (TREC_LINE_LIMIT + 10) + " 1 2.0 tag")
    run = _write(tmp_path / "long.run", rows)
    where = f"long.run:{lines + 1}: a line longer than 1 MiB"
    with pytest.raises(InputError, match=where):
        read_run(run)
    assert where in _evaluate_error(_qrels(tmp_path), run)


def test_a_file_without_newlines_fails_in_the_first_block(tmp_path: Path) -> None:
    flat = tmp_path / "flat.run"
    flat.write_bytes(b"q1 Q0 d1 1 2.0 tag " * (3 * TREC_LINE_LIMIT // 19))
    with pytest.raises(InputError, match=r"flat\.run:1: a line longer than 1 MiB"):
        read_run(flat)
    assert "flat.run:1: a line longer than 1 MiB" in _evaluate_error(_qrels(tmp_path), flat)
    with pytest.raises(InputError, match=r"flat\.run:1: a line longer than 1 MiB"):
        read_qrels(flat)


def test_a_line_just_under_the_limit_is_read(tmp_path: Path) -> None:
    rows = _run_lines(3)
    rows[1] = "q0 Q0 " + "d" * (TREC_LINE_LIMIT - 40) + " 2 999.5 tag"
    frame = read_run(_write(tmp_path / "ok.run", rows))
    assert len(frame) == 3


def test_iter_lines_stops_a_long_line_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"doc_id": "a", "text": "x"}\n' + "y" * 5000 + "\n")
    assert len(list(iter_lines(path, limit=10_000))) == 2
    with pytest.raises(InputError, match=r"docs\.jsonl:2: a line longer than 4,000 bytes"):
        list(iter_lines(path, limit=4000))


@pytest.mark.slow
def test_dev_zero_as_a_run_is_an_error_on_line_1_not_a_full_memory(tmp_path: Path) -> None:
    qrels = _qrels(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", "evaluate", str(qrels), "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "/dev/zero:1: not UTF-8 text: a NUL byte" in done.stderr


# Bad lines and duplicates -------------------------------------------------------------------


@pytest.mark.parametrize("where", quick_first(["first", "last"]))
def test_a_bad_score_in_a_large_run_is_named_by_both_readers(tmp_path: Path, where: str) -> None:
    rows = _run_lines(200_000)
    at = 1 if where == "first" else len(rows) - 1
    rows[at] = rows[at].replace(".5 tag", ".5x tag")
    run = _write(tmp_path / "bad.run", rows)
    message = f"bad.run:{at + 1}: score"
    with pytest.raises(InputError, match=message):
        read_run(run)
    assert message in _evaluate_error(_qrels(tmp_path), run)


@pytest.mark.slow
def test_a_qrels_of_identical_lines_names_lines_1_and_2(tmp_path: Path) -> None:
    path = tmp_path / "same.qrels"
    path.write_text("q1 0 d1 2\n" * 300_000)
    with pytest.raises(InputError, match=r"same\.qrels:2: .*twice, on lines 1 and 2"):
        read_qrels(path)
    with pytest.raises(InputError, match=r"same\.qrels:2: .*twice, on lines 1 and 2"):
        read_grades(str(path), clamp=False)


@pytest.mark.parametrize("collide", [False, True])
def test_the_earliest_repeat_is_named_even_when_hashes_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collide: bool
) -> None:
    lines = ["q1 0 a 1", "q1 0 b 1", "q2 0 c 1", "q1 0 b 0", "q1 0 a 0"]
    path = _write(tmp_path / "q.qrels", lines)
    if collide:
        monkeypatch.setattr(trec, "string_hashes", lambda col: np.zeros(len(col), dtype=np.uint64))
    with pytest.raises(InputError, match=r"q\.qrels:4: query 'q1' lists doc 'b' twice, on lines 2"):
        read_qrels(path)


def test_a_repeat_across_blocks_of_other_id_lengths_is_found() -> None:
    """Blocks of a file are chunks of one column: a pair in two of them is still a repeat."""
    blocks = [["abc", "abcd"], ["x" * 100, "abc"]]
    column = pa.chunked_array([pa.array(b, pa.large_string()) for b in blocks])
    table = pa.table({"query_id": pa.chunked_array([["q"] * 2, ["q"] * 2]), "doc_id": column})
    found: list[tuple[str, str, list[int]]] = []

    def error(qid: str, did: str, rows: list[int]) -> InputError:
        found.append((qid, did, rows))
        return InputError("twice")

    with pytest.raises(InputError):
        check_duplicates(table, query_codes(table["query_id"]), error)
    assert found == [("q", "abc", [0, 3])]


# A NUL byte: one rule -----------------------------------------------------------------------


@pytest.mark.parametrize("at", quick_first([0, 150_000]))
def test_a_nul_byte_is_refused_by_grade_and_evaluate_at_its_line(
    tmp_path: Path, at: int, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    rows = files.run.read_text().splitlines() + _run_lines(200_000, prefix="x")
    rows[at] = rows[at].replace("Q0", "Q\x000", 1)
    _write(files.run, rows)
    message = f"run.txt:{at + 1}: not UTF-8 text: a NUL byte"
    assert message in _evaluate_error(_qrels(tmp_path), files.run)
    argv = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--skip-missing")
    assert main(argv) == 2
    assert message in capsys.readouterr().err


# grade on an empty run ----------------------------------------------------------------------


def test_grade_names_the_empty_run_among_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    empty = tmp_path / "empty.run"
    empty.write_text("# only a comment\n\n")
    argv = files.args("--run", empty, "--judge", "lexical", "--store", tmp_path / "s.db")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{empty}: found no pairs to grade: the run holds no result (empty, or only" in err


# evaluate's command line --------------------------------------------------------------------


def test_evaluate_says_m_took_qrels_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _qrels(tmp_path), _write(tmp_path / "r.run", _run_lines(20))
    assert main(["evaluate", "-m", "nDCG@10", str(qrels), str(run)]) == 2
    err = capsys.readouterr().err
    assert f"-m took {qrels}, {run} as measures" in err and "-- QRELS RUN" in err
    assert main(["evaluate", "-m", "nDCG@10", "--", str(qrels), str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(qrels)]) == 2
    assert "required: RUN" in capsys.readouterr().err


def test_evaluate_says_a_run_given_as_qrels_looks_like_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _qrels(tmp_path), _write(tmp_path / "r.run", ["# a run", *_run_lines(20)])
    assert main(["evaluate", str(run), str(qrels)]) == 2
    err = capsys.readouterr().err
    assert f"{run}:2: this looks like a run" in err and "relgrade evaluate QRELS RUN" in err
    assert main(["evaluate", str(qrels), str(qrels)]) == 2
    err = capsys.readouterr().err
    assert f"{qrels}:1: expected 6 columns in a run line, found 4: this looks like qrels" in err


@pytest.mark.parametrize("size", [1, 5, 1 << 20, (1 << 20) + 1, 3 << 20])
def test_bounded_lines_splits_as_bytes_split_across_chunks(size: int) -> None:
    from grader.io.streams import bounded_lines

    data = b"a" * size + b"\nb\n\n" + b"c" * (size + 1) + b"\nlast"
    assert list(bounded_lines(io.BytesIO(data), "x", size + 4)) == data.split(b"\n")
    with pytest.raises(InputError, match=r"^x:4: a line longer than"):
        list(bounded_lines(io.BytesIO(data), "x", max(size, 1)))


@pytest.mark.slow
@pytest.mark.parametrize("where", quick_first(["early", "late", "query back"]))
def test_a_duplicate_in_a_large_run_is_named_alike_by_both_readers(
    tmp_path: Path, where: str
) -> None:
    rows = _run_lines(200_000)
    if where == "early":
        rows[5] = rows[3].replace(" 4 ", " 6 ")  # d3 again, in the same ranking
    elif where == "late":
        rows[-2] = rows[-40]
    else:  # q0 comes back, naming d1 again, before a repeat inside a later ranking
        rows.insert(300, "q0 Q0 d1 9 1.5 tag")
        rows[-2] = rows[-40]
    run = _write(tmp_path / "dup.run", rows)
    with pytest.raises(InputError) as whole:
        read_run(run)
    assert "twice, on lines" in str(whole.value)
    assert _evaluate_error(_qrels(tmp_path), run) == str(whole.value)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("q0 Q0 d0 1 2.5 bm25\n".encode("utf-16-le"), "not UTF-8 text: a NUL byte"),
        (b"\x00\x01\x02\x03\n" + bytes(range(256)) * 8, "not UTF-8 text: a NUL byte"),
        (b"PK\x03\x04\x14\x00" + bytes(range(128, 256)) * 8, "not valid UTF-8"),
    ],
    ids=["utf-16", "nul-first-line", "zip"],
)
def test_a_binary_run_is_reported_as_not_utf8(
    content: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run.bin"
    run.write_bytes(content)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q0 0 d0 1\n")
    files = write_grade_files(tmp_path)
    store = str(tmp_path / "s.db")
    grade = ["grade", "--queries", str(files.queries), "--docs", str(files.docs), "--run"]
    for argv in (["evaluate", str(qrels), str(run)], [*grade, str(run), "--judge", "lexical"]):
        assert main([*argv, "--store", store] if argv[0] == "grade" else argv) == 2
        err = capsys.readouterr().err
        assert f"{run}:1: {said}" in err
        assert "columns" not in err
