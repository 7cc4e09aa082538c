"""The plain-Python reader of small TREC files (grader/io/trec_small.py) against the Arrow readers.

`relgrade evaluate` reads small qrels and runs without importing Arrow. On every input both
readers must give the same answer, and the plain reader must never take a file the Arrow
readers refuse (it hands every file it does not take as is, errors included, to them): here on
hundreds of generated files (comments, blank lines, extra columns, irregular whitespace, CRLF,
ties in float32, odd number spellings, non-ASCII ids, queries apart, duplicates, bad lines;
tests/helpers/trec_small_files.py) and on the small files listed there. End to end through the
CLI: tests/test_trec_small_cli.py; files drawn by hypothesis: tests/test_trec_small_random.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.io import trec_small
from grader.io.trec_small import small_judged_run, small_qrels
from tests.helpers.trec_small_files import (
    NOT_TAKEN,
    ODD_GRADES,
    QRELS,
    RUN,
    SPELT_GRADES,
    TAKEN,
    compare_readers,
    generated_files,
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "chunk", [0, *(pytest.param(c, marks=pytest.mark.slow) for c in range(1, 6))]
)
def test_generated_files_read_alike(tmp_path: Path, chunk: int) -> None:
    taken = total = 0
    for seed in range(chunk * 60, (chunk + 1) * 60):
        qrels, run = generated_files(tmp_path, seed)
        precision = "float64" if seed % 3 == 0 else "float32"
        depth = [None, 1, 3, 10][seed % 4]
        _, run_taken = compare_readers(qrels, run, precision, depth)
        taken += run_taken
        total += 1
    assert taken >= total // 3  # the plain reader is the one that ran on most regular files


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TAKEN))
def test_files_it_takes_read_as_arrow_reads_them(tmp_path: Path, name: str) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_bytes(TAKEN[name].encode())
    for depth in (None, 1, 2):
        assert compare_readers(tmp_path / "qrels.txt", tmp_path / "run.txt", depth=depth) == (
            True,
            True,
        )


@pytest.mark.parametrize("name", sorted(NOT_TAKEN))
def test_files_it_does_not_take_go_to_arrow(tmp_path: Path, name: str) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_bytes(NOT_TAKEN[name].encode())
    assert compare_readers(tmp_path / "qrels.txt", tmp_path / "run.txt") == (True, False)


@pytest.mark.parametrize(
    "text",
    [
        "q1 0 a 1\nq1 0 a 2\n",  # a pair twice
        "q1 0 a 1\nq2 0 b 1\nq1 0 a 2\n",  # twice, apart
        "q1 0 a 1 x\n",  # five columns
        "q1 0 a\n",
        *(f"q1 0 a {g}\n" for g in ODD_GRADES),
    ],
)
def test_qrels_it_does_not_take_go_to_arrow(tmp_path: Path, text: str) -> None:
    (tmp_path / "qrels.txt").write_text(text)
    assert small_qrels(tmp_path / "qrels.txt") is None


def test_integer_spellings_are_read_as_arrow_reads_them(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text(
        "".join(f"q1 0 d{i} {g}\n" for i, g in enumerate(SPELT_GRADES))
    )
    (tmp_path / "run.txt").write_text("".join(f"q1 Q0 d{i} 1 {i} t\n" for i in range(8)))
    assert compare_readers(tmp_path / "qrels.txt", tmp_path / "run.txt") == (True, True)


def test_larger_files_go_to_arrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run.txt").write_text(RUN)
    (tmp_path / "qrels.txt").write_text(QRELS)
    judged = small_qrels(tmp_path / "qrels.txt")
    assert judged is not None
    monkeypatch.setattr(trec_small, "SMALL_BYTES", len(RUN.encode()))
    assert small_judged_run(tmp_path / "run.txt", judged) is not None
    monkeypatch.setattr(trec_small, "SMALL_BYTES", len(RUN.encode()) - 1)
    assert small_judged_run(tmp_path / "run.txt", judged) is None
    monkeypatch.setattr(trec_small, "SMALL_BYTES", len(QRELS) - 1)
    assert small_qrels(tmp_path / "qrels.txt") is None
