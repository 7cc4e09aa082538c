"""Large inputs that are wrong fail fast and small: the first bad line of a big run or qrels is
named without reading the whole file a second time on the irregular path
(bench/bad_input_memory.py measures the time and memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import grader.io.trec_arrow as trec_arrow
from grader.errors import InputError
from grader.io.trec import read_qrels, read_run

LINES = 200_000


def run_lines(n: int = LINES) -> list[str]:
    return [f"q{i // 100} Q0 d{i} {i % 100 + 1} {1000 - i % 100}.5 tag\n" for i in range(n)]


@pytest.fixture
def irregular_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every block read on the irregular path (whitespace normalised)."""
    calls: list[bytes] = []
    irregular = trec_arrow._irregular_block

    def counting(block: bytes, *args: Any, **kwargs: Any) -> Any:
        calls.append(block)
        return irregular(block, *args, **kwargs)

    monkeypatch.setattr(trec_arrow, "_irregular_block", counting)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "text", "message"),
    [
        (2, "q0 Q0 dx 2 abc tag\n", "score 'abc' is not a finite number"),
        pytest.param(
            LINES,
            "q1999 Q0 dx 2 1.5.3 tag\n",
            "score '1.5.3' is not a finite number",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            LINES,
            "q1999 Q0 dx 2 nan tag\n",
            "score 'nan' is not a finite number",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            150_001,
            "q1500 Q0 dx 2 tag\n",
            "expected 6 columns in a run line, found 5",
            marks=pytest.mark.slow,
        ),
        (3, "q0 Q0 d\xff 2 1.0 tag\n", "not valid UTF-8"),
    ],
)
def test_bad_line_of_a_large_run_is_named_without_the_irregular_path(
    tmp_path: Path, irregular_reads: list[bytes], line: int, text: str, message: str
) -> None:
    lines = run_lines()
    lines[line - 1] = text
    path = tmp_path / "big.run"
    path.write_bytes("".join(lines).encode().replace(b"\xc3\xbf", b"\xff"))  # a lone 0xff byte
    with pytest.raises(InputError) as err:
        read_run(path)
    assert f"{path}:{line}: {message}" in str(err.value)
    assert irregular_reads == []


def test_first_of_two_bad_lines_is_named(tmp_path: Path, irregular_reads: list[bytes]) -> None:
    lines = run_lines()
    lines[1] = "q0 Q0 dx 2 abc tag\n"
    lines[-1] = "q1999 Q0 dy 2 def tag\n"
    path = tmp_path / "big.run"
    path.write_text("".join(lines))
    with pytest.raises(InputError, match=r"big\.run:2: score 'abc'"):
        read_run(path)
    assert irregular_reads == []


def test_bad_line_is_found_across_blocks(
    tmp_path: Path, irregular_reads: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small blocks: line numbers carry over block boundaries, comments and blank lines count."""
    monkeypatch.setattr("grader.io.trec_arrow._PARSE_BLOCK", 4096)
    lines = run_lines(20_000)
    lines[100] = "# a comment line\n"
    lines[200] = "\n"
    lines[19_000] = "q190 Q0 dx 1 oops tag\n"
    path = tmp_path / "blocks.run"
    path.write_text("".join(lines))
    with pytest.raises(InputError, match=r"blocks\.run:19001: score 'oops'"):
        read_run(path)
    assert irregular_reads == []


@pytest.mark.slow
def test_irregular_but_valid_run_still_reads(tmp_path: Path, irregular_reads: list[bytes]) -> None:
    """The fast path rejects a doubled space late in the file; the search finds no bad line, so
    the irregular path reads it."""
    lines = run_lines()
    lines[150_000] = "q1500  Q0 dz 1   7.5 tag\n"
    path = tmp_path / "irregular.run"
    path.write_text("".join(lines))
    frame = read_run(path)
    assert len(frame) == LINES
    assert "dz" in set(frame["doc_id"])
    assert len(irregular_reads) == 1


@pytest.mark.slow
def test_irregular_run_with_a_bad_line_later_names_it(
    tmp_path: Path, irregular_reads: list[bytes]
) -> None:
    lines = run_lines()
    lines[10] = "q0  Q0 dz 1   7.5 tag\n"  # valid, only irregular
    lines[180_000] = "q1800 Q0 dx 1 - tag\n"
    path = tmp_path / "mixed.run"
    path.write_text("".join(lines))
    with pytest.raises(InputError, match=r"mixed\.run:180001: score '-'"):
        read_run(path)
    assert irregular_reads == []


@pytest.mark.slow
def test_bad_grade_at_the_end_of_large_qrels(tmp_path: Path, irregular_reads: list[bytes]) -> None:
    lines = [f"q{i // 100} 0 d{i} {i % 4}\n" for i in range(LINES)]
    lines[-1] = "q1999 0 dx two\n"
    path = tmp_path / "big.qrels"
    path.write_text("".join(lines))
    with pytest.raises(InputError, match=rf"big\.qrels:{LINES}: grade 'two' is not an integer"):
        read_qrels(path)
    assert irregular_reads == []


@pytest.mark.slow
def test_duplicate_pair_in_a_large_run_names_both_lines(tmp_path: Path) -> None:
    lines = run_lines()
    lines[-1] = "q0 Q0 d5 7 1.0 tag\n"  # d5 is on line 6
    path = tmp_path / "dup.run"
    path.write_text("".join(lines))
    with pytest.raises(
        InputError, match=rf"dup\.run:{LINES}: .*'d5' twice, on lines 6 and {LINES}"
    ):
        read_run(path)
