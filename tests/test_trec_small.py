"""The plain-Python reader of small TREC files (grader/io/trec_small.py) against the Arrow readers.

`relgrade evaluate` reads small qrels and runs without importing Arrow. On every input both
readers must give the same answer, and the plain reader must never take a file the Arrow
readers refuse (it hands every file it does not take as is, errors included, to them): here on
hundreds of generated files (comments, blank lines, extra columns, irregular whitespace, CRLF,
ties in float32, odd number spellings, non-ASCII ids, queries apart, duplicates, bad lines) and
end to end through the CLI with the plain reader on and off (output, stderr, exit code).
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grader.cli.main import main
from grader.errors import InputError
from grader.evaluation import files as evaluate_files
from grader.io import trec_small
from grader.io.run_stream import judged_run
from grader.io.trec import read_qrels_columns
from grader.io.trec_small import small_judged_run, small_qrels
from grader.metrics.join_arrow import Judgments, judgments
from grader.metrics.judged_rows import JudgedRun, Ranked
from tests.helpers.params import quick_first

ROOT = Path(__file__).resolve().parents[1]
DL2019 = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl-2019"
SCORES = ["1.5", "+1.5", ".5", "5.", "1E+05", "-0", "0", "00.5", "-2.25e-1", "3", "2.0000001"]
ODD_SCORES = ["high", "nan", "inf", "-inf", "1e999", "1_0", "\u0661", "0x1A", "1..2", ""]
ODD_GRADES = ["one", "2.5", "1e99", "99999999999999999999", "\u0662", "nan", "1_0"]  # not taken
SPELT_GRADES = ["+2", "007", "-0", "-2", "123456789012345", "2.0", "1e0", "3.000000000000000001"]
ODD_IDS = ["d\u00e9j\u00e0", "\u6587\u6863", "a\u00a0b", '"q"', "x\x0cy", "\ufeffz"]


def _same(a: Ranked, b: Ranked) -> None:
    assert a.query_ids == b.query_ids
    for field in ("query", "rank", "grade", "returned", "ideal_query", "ideal_grade", "ideal_pos"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.unjudged_queries == b.unjudged_queries


def _arrow_qrels(path: Path) -> Judgments | str:
    """The Arrow reader's index of the qrels, or its error's text."""
    try:
        cols = read_qrels_columns(path, any_grade=True)
    except InputError as exc:
        return str(exc)
    return judgments(cols.query_id, cols.doc_id, cols.grade)


def _arrow_run(path: Path, judged: Judgments, precision: str, depth: int | None) -> JudgedRun | str:
    try:
        return judged_run(path, judged, precision=precision, depth=depth)  # type: ignore[arg-type]
    except InputError as exc:
        return str(exc)


def _compare(
    qrels: Path, run: Path, precision: str = "float32", depth: int | None = None
) -> tuple[bool, bool]:
    """Assert both readers agree on these files; (qrels taken, run taken) by the plain one."""
    arrow_qrels = _arrow_qrels(qrels)
    small = small_qrels(qrels)
    if isinstance(arrow_qrels, str):
        assert small is None, f"plain reader took qrels Arrow refuses: {arrow_qrels}"
        return False, False
    if small is None:
        return False, False
    assert small.query_ids == [str(q) for q in arrow_qrels.query_ids.to_pylist()]
    for field in ("ideal_query", "ideal_grade", "ideal_pos"):
        np.testing.assert_array_equal(
            getattr(small.ideal, field.removeprefix("ideal_")), getattr(arrow_qrels, field)
        )
    expected = _arrow_run(run, arrow_qrels, precision, depth)
    got = small_judged_run(run, small, precision=precision, depth=depth)  # type: ignore[arg-type]
    if isinstance(expected, str):
        assert got is None, f"plain reader took a run Arrow refuses: {expected}"
        return True, False
    if got is None:
        return True, False
    _same(got.ranked, expected.ranked)
    assert got.rows == expected.rows
    # the Arrow index made from the plain one is the Arrow reader's
    _same(_arrow_run(run, small.arrow, precision, depth).ranked, expected.ranked)  # type: ignore[union-attr]
    return True, True


# --- generated files ---------------------------------------------------------------------------


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


def _files(folder: Path, seed: int) -> tuple[Path, Path]:
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


@pytest.mark.parametrize(
    "chunk", [0, *(pytest.param(c, marks=pytest.mark.slow) for c in range(1, 6))]
)
def test_generated_files_read_alike(tmp_path: Path, chunk: int) -> None:
    taken = total = 0
    for seed in range(chunk * 60, (chunk + 1) * 60):
        qrels, run = _files(tmp_path, seed)
        precision = "float64" if seed % 3 == 0 else "float32"
        depth = [None, 1, 3, 10][seed % 4]
        _, run_taken = _compare(qrels, run, precision, depth)
        taken += run_taken
        total += 1
    assert taken >= total // 3  # the plain reader is the one that ran on most regular files


# --- what the plain reader takes ---------------------------------------------------------------

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


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_files_it_takes_read_as_arrow_reads_them(tmp_path: Path, name: str) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_bytes(TAKEN[name].encode())
    for depth in (None, 1, 2):
        assert _compare(tmp_path / "qrels.txt", tmp_path / "run.txt", depth=depth) == (True, True)


@pytest.mark.parametrize("name", sorted(NOT_TAKEN))
def test_files_it_does_not_take_go_to_arrow(tmp_path: Path, name: str) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_bytes(NOT_TAKEN[name].encode())
    assert _compare(tmp_path / "qrels.txt", tmp_path / "run.txt") == (True, False)


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
    assert _compare(tmp_path / "qrels.txt", tmp_path / "run.txt") == (True, True)


def test_larger_files_go_to_arrow(tmp_path: Path) -> None:
    (tmp_path / "run.txt").write_text(RUN)
    (tmp_path / "qrels.txt").write_text(QRELS)
    judged = small_qrels(tmp_path / "qrels.txt")
    assert judged is not None
    size = len(RUN.encode())
    assert small_judged_run(tmp_path / "run.txt", judged, limit=size) is not None
    assert small_judged_run(tmp_path / "run.txt", judged, limit=size - 1) is None
    assert small_qrels(tmp_path / "qrels.txt", limit=len(QRELS) - 1) is None


@pytest.mark.skipif(not (DL2019 / "2019qrels-pass.txt").exists(), reason="TREC DL 2019 absent")
@pytest.mark.slow
def test_trec_dl_2019_reads_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real qrels, and a run of their judged passages and others with ties (two decimals)."""
    qrels = DL2019 / "2019qrels-pass.txt"
    rng = np.random.default_rng(19)
    lines = []
    judged: dict[str, list[str]] = {}
    for line in qrels.read_text().splitlines():
        qid, _, doc, _ = line.split()
        judged.setdefault(qid, []).append(doc)
    for qid, docs in judged.items():
        picked = [*rng.permutation(docs)[:150], *(f"{9_000_000 + i}" for i in range(100))]
        scores = np.round(rng.normal(size=len(picked)), 2)
        ranked = enumerate(zip(picked, scores, strict=True), 1)
        lines += [f"{qid} Q0 {d} {r} {s} run" for r, (d, s) in ranked]
    run = tmp_path / "dl.run"
    run.write_text("\n".join(lines) + "\n")
    for precision, depth in [("float32", None), ("float64", 10), ("float32", 100)]:
        assert _compare(qrels, run, precision, depth) == (True, True)
    argv = [str(qrels), str(run), *MEASURES, "--per-query", "--format", "json"]
    code, out, _ = _both(monkeypatch, capsys, argv)
    assert code == 0 and len(json.loads(out)) > 43 * 8


# --- end to end: the CLI with the plain reader on and off --------------------------------------


PLAIN_RUNS: list[bool] = []
"""Per run the CLI read with the plain reader on: whether that reader gave the joined run."""


def _cli(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    *,
    plain: bool,
    stdin: bytes = b"",
) -> tuple[int, str, str]:
    with monkeypatch.context() as m:
        if not plain:
            m.setattr(trec_small, "SMALL_BYTES", -1)  # every file to the Arrow readers
        else:

            def spy(*args: Any, **kwargs: Any) -> JudgedRun | None:
                got = small_judged_run(*args, **kwargs)
                PLAIN_RUNS.append(got is not None)
                return got

            m.setattr(evaluate_files, "small_judged_run", spy)
        m.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main(["evaluate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _both(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    stdin: bytes = b"",
) -> tuple[int, str, str]:
    plain = _cli(monkeypatch, capsys, argv, plain=True, stdin=stdin)
    arrow = _cli(monkeypatch, capsys, argv, plain=False, stdin=stdin)
    assert plain == arrow
    return plain


MEASURES = ["-m", "nDCG@10", "RR", "P@2", "AP", "R@100", "Judged@3", "NumRet", "Bpref"]


@pytest.mark.parametrize(
    "name", [*quick_first(sorted(TAKEN), 3), *quick_first(sorted(NOT_TAKEN), 3)]
)
def test_cli_prints_the_same_either_way(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    run = tmp_path / "run.txt"
    run.write_bytes({**TAKEN, **NOT_TAKEN}[name].encode())
    for fmt in ("json", "table"):
        argv = [str(tmp_path / "qrels.txt"), str(run), *MEASURES, "--per-query", "--format", fmt]
        PLAIN_RUNS.clear()
        code, out, err = _both(monkeypatch, capsys, argv)
        assert (code == 0 and "P(rel=2)@2" in out) or (code == 2 and "error" in err and not out)
        assert code == 0 or name in NOT_TAKEN
        if name in TAKEN:  # the plain reader read it (the comparison is not Arrow with itself)
            assert PLAIN_RUNS == [True]


@pytest.mark.parametrize(
    ("qrels", "run", "words"),
    [
        (QRELS, RUN + "q2 Q0 x 2\n", "run.txt:5: expected 6 columns"),
        (QRELS, "# c\n" + RUN.replace("2.0", "high", 1), "run.txt:3: score 'high'"),
        (QRELS, RUN + "q1 Q0 a 9 0.1 bm25\n", "lines 2 and 5"),
        (QRELS, RUN.replace("3.0", "inf"), "not a finite number"),
        (QRELS + "q2 0 x 1\n", RUN, "qrels.txt"),
        (QRELS.replace(" 2\n", " 2.5\n", 1), RUN, "qrels.txt:3: grade 2.5 is not an integer"),
        (QRELS + "q3 0 z 1 extra\n", RUN, "qrels.txt:6: expected 4 columns"),
        ("# nothing\n", RUN, "no judgments"),
    ],
)
def test_cli_errors_are_the_same_either_way(
    tmp_path: Path,
    qrels: str,
    run: str,
    words: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "qrels.txt").write_text(qrels)
    (tmp_path / "run.txt").write_text(run)
    code, out, err = _both(
        monkeypatch, capsys, [str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt")]
    )
    assert code == 2 and out == ""
    assert words in err


def test_cli_reads_gz_and_stdin_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "qrels.txt.gz"
    qrels.write_bytes(gzip.compress(("# people\n" + QRELS).encode()))
    run = tmp_path / "bm25.run.gz"
    run.write_bytes(gzip.compress(RUN.encode()))
    argv = [str(qrels), str(run), "-", *MEASURES, "--format", "json"]
    code, out, _ = _both(monkeypatch, capsys, argv, stdin=RUN.replace(" a ", " z ").encode())
    assert code == 0
    runs = {r["run"] for r in json.loads(out)}
    assert runs == {"bm25", "stdin"}
    bad = b"q1 Q0 a 1 1.0 t\nq1 Q0 b 2\n"
    code, _, err = _both(monkeypatch, capsys, [str(qrels), "-"], stdin=bad)
    assert code == 2 and "stdin:2: expected 6 columns" in err
    broken = tmp_path / "broken.run.gz"
    broken.write_bytes(gzip.compress(RUN.encode())[:-12])
    code, _, err = _both(monkeypatch, capsys, [str(qrels), str(broken)])
    assert code == 2 and "broken.run.gz" in err


@pytest.mark.parametrize("seed", quick_first(range(40), 3))
def test_cli_on_generated_files_prints_the_same_either_way(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _files(tmp_path, 1000 + seed)
    argv = [str(qrels), str(run), *MEASURES, "--per-query", "--format", "csv"]
    _both(monkeypatch, capsys, argv)


# --- what is imported --------------------------------------------------------------------------


def _loaded_in_child(qrels: Path, run: Path, *, plain: bool) -> list[str]:
    code = (
        "import sys\n"
        "from grader.io import trec_small\n"
        f"trec_small.SMALL_BYTES = {trec_small.SMALL_BYTES if plain else -1}\n"
        "from grader.cli.main import main\n"
        f"assert main(['evaluate', {str(qrels)!r}, {str(run)!r}, '--format', 'json']) == 0\n"
        "print([m for m in ('pyarrow', 'pandas') if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))
    return loaded


def test_small_files_never_import_arrow_and_large_ones_no_pandas(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    assert _loaded_in_child(tmp_path / "qrels.txt", tmp_path / "run.txt", plain=True) == []
    assert _loaded_in_child(tmp_path / "qrels.txt", tmp_path / "run.txt", plain=False) == [
        "pyarrow"
    ]
