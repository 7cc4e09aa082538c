"""Both TREC readers fed the same random files (grader/io/trec_small.py beside the Arrow readers).

Hypothesis draws qrels and a run (ties in float32 and float64, extra columns, ids that repeat),
then spoils their text the ways real files are spoilt: cells moved across newlines (every line's
cells still counted right in total), a NUL, CRLF or a lone CR, comments, blank lines, doubled
separators. Whatever the file, the plain reader must accept only what the Arrow reader accepts
and give the same joined run (`compare_readers`); a file it does not take goes to the Arrow
reader, so `relgrade evaluate` answers alike either way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers.hypothesis_scale import examples
from tests.helpers.trec_small_files import compare_readers

Spoil = tuple[str, int, int]
"""(kind, where, and for "move" how many cells: > 0 from a line's end to the next's start)."""

QIDS = ["1", "2", "q3", "q\u00e9"]
DOCS = [f"d{i}" for i in range(8)]
SCORES = ["1.0", "1", "1.00000001", "0.99999999", "0.5", "-2.25e-1", "3", "+1.5", "1E+05"]

_qrels = st.lists(
    st.tuples(st.sampled_from(QIDS), st.sampled_from(DOCS), st.integers(-2, 4)),
    min_size=1,
    max_size=12,
)
_run = st.lists(
    st.tuples(
        st.sampled_from(QIDS),
        st.sampled_from(DOCS),
        st.sampled_from(SCORES),
        st.lists(st.sampled_from(["x", "7"]), max_size=2),  # extra columns
    ),
    max_size=16,
)
_spoil = st.lists(
    st.tuples(
        st.sampled_from(["move", "move", "nul", "cr", "comment", "blank", "double"]),
        st.integers(0, 30),
        st.integers(-3, 3),
    ),
    max_size=3,
)


def _lines(rows: list[list[str]], spoils: list[Spoil], sep: str) -> list[str]:
    """The text lines of `rows` with `spoils` done, in order."""
    for kind, at, k in spoils:
        if kind == "move" and len(rows) > 1:  # cells moved across a newline, none lost
            i = at % (len(rows) - 1)
            if k > 0 and k < len(rows[i]):  # the end of line i starts line i+1
                rows[i : i + 2] = [rows[i][:-k], rows[i][-k:] + rows[i + 1]]
            elif k < 0 and -k < len(rows[i + 1]):  # the start of line i+1 ends line i
                rows[i : i + 2] = [rows[i] + rows[i + 1][:-k], rows[i + 1][-k:]]
    lines = [sep.join(r) for r in rows]
    for kind, at, _ in spoils:
        i = at % (len(lines) + 1)
        if kind == "nul" and lines:
            lines[i % len(lines)] += "\x00"
        elif kind == "cr" and lines:
            lines[i % len(lines)] += "\r"
        elif kind == "comment":
            lines.insert(i, f"#{sep}note")
        elif kind == "blank":
            lines.insert(i, "")
        elif kind == "double" and lines:
            lines[i % len(lines)] = lines[i % len(lines)].replace(sep, sep * 2, 1)
    return lines


def _text(rows: list[list[str]], spoils: list[Spoil], sep: str, crlf: bool) -> bytes:
    end = "\r\n" if crlf else "\n"
    return "".join(line + end for line in _lines(rows, spoils, sep)).encode()


@settings(max_examples=examples(300), deadline=None)
@given(
    qrels=_qrels,
    run=_run,
    qrels_spoils=_spoil,
    run_spoils=_spoil,
    sep=st.sampled_from([" ", "\t"]),
    crlf=st.booleans(),
    float64=st.booleans(),
    depth=st.sampled_from([None, 1, 3]),
)
# a run whose lines hold 6, 5 and 7 cells: 6 a line on average
@example(
    qrels=[("1", "d0", 2), ("1", "d1", 1), ("2", "d2", 3)],
    run=[("1", "d0", "1.0", []), ("1", "d1", "0.5", []), ("2", "d2", "1", [])],
    qrels_spoils=[],
    run_spoils=[("move", 1, 1)],
    sep=" ",
    crlf=False,
    float64=False,
    depth=None,
)
# qrels whose lines hold 4, 5 and 3 cells
@example(
    qrels=[("1", "d0", 2), ("1", "d1", 1), ("2", "d2", 3)],
    run=[("1", "d0", "1.0", []), ("2", "d2", "1", [])],
    qrels_spoils=[("move", 1, -1)],
    run_spoils=[],
    sep="\t",
    crlf=True,
    float64=True,
    depth=None,
)
def test_both_readers_accept_the_same_files_and_read_the_same_values(
    qrels: list[tuple[str, str, int]],
    run: list[tuple[str, str, str, list[str]]],
    qrels_spoils: list[Spoil],
    run_spoils: list[Spoil],
    sep: str,
    crlf: bool,
    float64: bool,
    depth: int | None,
) -> None:
    qrels_rows = [[q, "0", d, str(g)] for q, d, g in qrels]
    run_rows = [[q, "Q0", d, str(r), s, "tag", *x] for r, (q, d, s, x) in enumerate(run, 1)]
    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = Path(folder) / "qrels.txt", Path(folder) / "run.txt"
        qrels_path.write_bytes(_text(qrels_rows, qrels_spoils, sep, crlf))
        run_path.write_bytes(_text(run_rows, run_spoils, sep, crlf))
        compare_readers(qrels_path, run_path, "float64" if float64 else "float32", depth)
