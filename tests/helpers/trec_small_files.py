"""TREC files for the plain-Python reader's tests (grader/io/trec_small.py): generated qrels and
runs with the oddities real files have, the small files it takes and those it hands to the Arrow
readers, and the comparison of the two readers on a pair of files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.errors import InputError
from grader.io.run_stream import judged_run
from grader.io.trec import read_qrels_columns
from grader.io.trec_small import small_judged_run, small_qrels
from grader.metrics.join_arrow import Judgments, judgments
from grader.metrics.judged_rows import JudgedRun, Ranked

SCORES = ["1.5", "+1.5", ".5", "5.", "1E+05", "-0", "0", "00.5", "-2.25e-1", "3", "2.0000001"]
ODD_SCORES = ["high", "nan", "inf", "-inf", "1e999", "1_0", "\u0661", "0x1A", "1..2", ""]
ODD_GRADES = ["one", "2.5", "1e99", "99999999999999999999", "\u0662", "nan", "1_0"]  # not taken
SPELT_GRADES = ["+2", "007", "-0", "-2", "123456789012345", "2.0", "1e0", "3.000000000000000001"]
ODD_IDS = ["d\u00e9j\u00e0", "\u6587\u6863", "a\u00a0b", '"q"', "x\x0cy", "\ufeffz"]


def same_ranked(a: Ranked, b: Ranked) -> None:
    """Assert two joined runs are equal, field by field."""
    assert a.query_ids == b.query_ids
    for field in ("query", "rank", "grade", "returned", "ideal_query", "ideal_grade", "ideal_pos"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.unjudged_queries == b.unjudged_queries


def arrow_index(path: Path) -> Judgments | str:
    """The Arrow reader's index of the qrels, or its error's text."""
    try:
        cols, _ = read_qrels_columns(path, any_grade=True)
    except InputError as exc:
        return str(exc)
    return judgments(cols["query_id"], cols["doc_id"], cols["grade"].to_numpy())


def arrow_run(path: Path, judged: Judgments, precision: str, depth: int | None) -> JudgedRun | str:
    """The Arrow reader's joined run, or its error's text."""
    try:
        return judged_run(path, judged, precision=precision, depth=depth)  # type: ignore[arg-type]
    except InputError as exc:
        return str(exc)


def compare_readers(
    qrels: Path, run: Path, precision: str = "float32", depth: int | None = None
) -> tuple[bool, bool]:
    """Assert both readers agree on these files; (qrels taken, run taken) by the plain one."""
    expected_qrels = arrow_index(qrels)
    small = small_qrels(qrels)
    if isinstance(expected_qrels, str):
        assert small is None, f"plain reader took qrels Arrow refuses: {expected_qrels}"
        return False, False
    if small is None:
        return False, False
    assert small.query_ids == [str(q) for q in expected_qrels.query_ids.to_pylist()]
    for field in ("query", "grade", "pos"):
        np.testing.assert_array_equal(
            getattr(small.ideal, field), getattr(expected_qrels.ideal, field)
        )
    expected = arrow_run(run, expected_qrels, precision, depth)
    got = small_judged_run(run, small, precision=precision, depth=depth)  # type: ignore[arg-type]
    if isinstance(expected, str):
        assert got is None, f"plain reader took a run Arrow refuses: {expected}"
        return True, False
    if got is None:
        return True, False
    same_ranked(got.ranked, expected.ranked)
    assert got.rows == expected.rows
    # the Arrow index made from the plain one is the Arrow reader's
    same_ranked(arrow_run(run, small.arrow, precision, depth).ranked, expected.ranked)  # type: ignore[union-attr]
    return True, True


def _pick(rng: np.random.Generator, items: list[str]) -> str:
    return items[int(rng.integers(len(items)))]


def _score(rng: np.random.Generator) -> str:
    kind = int(rng.integers(6))
    if kind == 0:
        return _pick(rng, SCORES)
    if kind == 1:  # long decimals: both readers must round them alike
        digits = "".join(str(d) for d in rng.integers(0, 10, size=int(rng.integers(15, 30))))
        return f"{digits[:3]}.{digits[3:]}"
    if kind == 2:  # equal in float32, different in float64
        return _pick(rng, ["1.0", "1.00000001", "0.99999999", "1.0000001"])
    return f"{float(rng.integers(0, 8)) / 4:g}"  # ties


def generated_files(folder: Path, seed: int) -> tuple[Path, Path]:
    """Qrels and a run from seed: mostly regular, with the oddities the module docstring lists."""
    rng = np.random.default_rng(seed)
    odd = rng.random() < 0.5  # a file with one rare oddity somewhere
    blank = _pick(rng, [" ", "\t"])
    sep = blank * 2 if rng.random() < 0.15 else " \t" if rng.random() < 0.1 else blank
    ids = [f"d{i}" for i in range(30)] + (ODD_IDS if rng.random() < 0.2 else [])
    qrels: list[list[str]] = []
    run: list[list[str]] = []
    for q in range(int(rng.integers(1, 6))):
        qid = f"{q + 1}" if rng.random() < 0.5 else f"q{q}"
        docs = list(dict.fromkeys(_pick(rng, ids) for _ in range(int(rng.integers(1, 25)))))
        for d in docs[: len(docs) // 2 + 1]:
            qrels.append([qid, "0", d, str(int(rng.integers(-2, 5)))])
        if rng.random() < 0.15:
            continue  # a judged query the run does not answer
        for rank, d in enumerate(docs, 1):
            extra = ["x", "7"] if rng.random() < 0.1 else []
            run.append([qid, "Q0", d, str(rank), _score(rng), "tag", *extra])
    if rng.random() < 0.3:
        run.append(["stray", "Q0", "d1", "1", "1.0", "tag"])  # a query the qrels lack
    if odd:
        target = run if rng.random() < 0.7 else qrels
        kind = int(rng.integers(7))
        if target and kind == 0:  # a bad number
            row = target[int(rng.integers(len(target)))]
            at = 4 if target is run else 3
            row[at] = _pick(rng, ODD_SCORES if target is run else ODD_GRADES + SPELT_GRADES)
        elif target and kind == 1:  # a line too short, or qrels too long
            row = target[int(rng.integers(len(target)))]
            row[:] = row[:-1] if target is run or rng.random() < 0.5 else [*row, "x"]
        elif target and kind == 2:  # a (query, doc) twice
            target.append(list(target[int(rng.integers(len(target)))]))
        elif target and kind == 3:  # a query's lines apart
            target.append(list(target[0]))
            target[-1][2] = "late"
        elif target and kind == 4:  # a line broken in two: as many cells, over two lines
            at = int(rng.integers(len(target)))
            row = target[at]
            cut = int(rng.integers(1, len(row)))
            target[at : at + 1] = [row[:cut], row[cut:]]

    def text(rows: list[list[str]]) -> str:
        lines = [sep.join(r) for r in rows]
        if rng.random() < 0.4:  # comments of every shape, blank and whitespace-only lines
            comments = ["# header", "  # indented", "#q1 Q0 zz 1 9.0 t", "", " "]
            for extra in [c.replace(" ", blank) for c in comments]:
                if rng.random() < 0.4:
                    lines.insert(int(rng.integers(len(lines) + 1)), extra)
        if rng.random() < 0.2:  # leading and trailing separators
            lines = [f"{sep}{line}{sep}" if line and rng.random() < 0.3 else line for line in lines]
        end = "\r\n" if rng.random() < 0.15 else "\n"
        body = end.join(lines)
        return body + (end if rng.random() < 0.9 else "")

    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    qrels_path.write_text(text(qrels), newline="")
    run_path.write_text(text(run), newline="")
    return qrels_path, run_path


QRELS = "q1 0 a 3\nq1 0 b 1\nq1 0 c 2\nq2 0 x 2\nq2 0 y 0\n"
RUN = "q1 Q0 b 1 3.0 bm25\nq1 Q0 a 2 2.0 bm25\nq1 Q0 c 3 1.0 bm25\nq2 Q0 y 1 2.0 bm25\n"
TAKEN = {
    "regular": RUN,
    "tabs": RUN.replace(" ", "\t"),
    "extra columns": RUN.replace("bm25\n", "bm25 x 7\n"),
    "some extra columns": RUN.replace("1.0 bm25\n", "1.0 bm25 x\n"),
    "extra columns first": RUN.replace("3.0 bm25\n", "3.0 bm25 x\n").replace(
        "2.0 bm25\n", "2.0 bm25 x y\n"
    ),
    "control characters": RUN.replace(" a ", " a\x01\x7fb ").replace(" Q0 y", "  Q0 \x1ay"),
    "comments and blanks": "# run\n\n" + RUN.replace("\nq2", "\n  # note\n \nq2") + "#end\n",
    "irregular spaces": RUN.replace(" Q0 ", "   Q0 ").replace("q2", "  q2") + "\n",
    "crlf": RUN.replace("\n", "\r\n"),
    "no final newline": RUN.rstrip("\n"),
    "queries apart": RUN + "q1 Q0 z 4 9.5 bm25\n",
    "unknown query": RUN + "q9 Q0 z 1 1.0 bm25\n",
    "ties": "q1 Q0 a 1 1.0 t\nq1 Q0 c 2 1.00000001 t\nq1 Q0 b 3 1.0 t\n",
    "non-ascii ids": RUN.replace(" a ", " \u00e9t\u00e9 ").replace(" b ", " \u6587 "),
    "number spellings": RUN.replace("3.0", "+3.").replace("2.0", ".2e1").replace("1.0", "1E0"),
    "empty": "",
    "comments only": "# nothing\n",
}
NOT_TAKEN = {
    "mixed separators": RUN.replace(" Q0 ", "\tQ0 "),
    "quotes": RUN.replace(" a ", ' "a" '),
    "byte order mark": "\ufeff" + RUN,
    "no-break space": RUN.replace(" a ", " a\u00a0z "),
    "form feed": RUN.replace(" a ", " a\x0cz "),
    "lone cr": RUN.replace("\n", "\r", 1),
    "nul": RUN.replace(" a ", " a\x00 "),
    "short line": RUN + "q2 Q0 x 2\n",
    "two half lines": RUN + "q2 Q0 x\n2 1.5 bm25\n",  # six cells over two lines
    "half lines apart": "q1 Q0 b\n1 3.0 bm25\n" + RUN.replace("q1 Q0 b 1 3.0 bm25\n", ""),
    "nan": RUN.replace("1.0", "nan"),
    "inf": RUN.replace("1.0", "1e999"),
    "underscore": RUN.replace("3.0", "3_0"),
    "arabic digit": RUN.replace("3.0", "\u0663"),
    "duplicate": RUN + "q1 Q0 a 4 0.5 bm25\n",
    "duplicate apart": RUN + "q2 Q0 x 2 1.0 bm25\nq1 Q0 b 4 0.5 bm25\n",
}
