"""Every input path read from a pipe, a FIFO, `<(...)` or a compressed file (issue 25, point 2).

Runs, qrels, queries, docs, judgments and human grades given as a real FIFO (a writer thread,
`tests/helpers/fifo.py`) or through bash's process substitution (`/dev/fd/N`) are read once,
give the answers the same regular file gives, and name the path and line of an error (exit 2,
never zeros). `.gz`, `.bz2`, `.xz` and `.zst` read the same everywhere.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from grader.cli.main import main
from grader.errors import InputError
from grader.io.docs import read_docs, read_queries
from grader.io.grades import read_human_grades
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels, read_run
from tests.helpers.fifo import fifo

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "code-search"
ROOT = Path(__file__).resolve().parents[1]


def _compress(data: bytes, kind: str) -> bytes:
    if kind == "gz":
        return gzip.compress(data)
    if kind == "bz2":
        return bz2.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as out:
        out.write(data)
    return bytes(sink.getvalue().to_pybytes())


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _qrels(tmp_path: Path) -> Path:
    """The example's human grades as TREC qrels."""
    rows = read_human_grades(EXAMPLES / "human.csv")
    path = tmp_path / "human.qrels"
    path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, d, g in rows[["query_id", "doc_id", "grade"]].values)
    )
    return path


# Every reader, every compression ------------------------------------------------------------

READERS: dict[str, tuple[str, Callable[[Path], Any]]] = {
    "queries": ("queries.tsv", lambda p: read_queries(p)),
    "docs": ("docs.jsonl", lambda p: read_docs(p)),
    "human grades": ("human.csv", lambda p: read_human_grades(p).to_dict("list")),
    "run": ("run.bm25.txt", lambda p: read_run(p).to_dict("list")),
}


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
@pytest.mark.parametrize("what", list(READERS))
def test_every_reader_reads_every_compression_as_the_plain_file(
    tmp_path: Path, what: str, kind: str
) -> None:
    name, read = READERS[what]
    plain = EXAMPLES / name
    packed = tmp_path / f"{name}.{kind}"
    packed.write_bytes(_compress(plain.read_bytes(), kind))
    assert read(packed) == read(plain)


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_qrels_and_judgments_read_compressed_and_a_bad_line_is_named(
    tmp_path: Path, kind: str
) -> None:
    qrels = _qrels(tmp_path)
    packed = tmp_path / f"q.qrels.{kind}"
    packed.write_bytes(_compress(qrels.read_bytes(), kind))
    assert read_qrels(packed).to_dict("list") == read_qrels(qrels).to_dict("list")
    line = {"query_id": "q1", "doc_id": "d1", "grade": 2, "status": "ok", "judge": "x", "key": "k"}
    judgments = json.dumps(line).encode() + b"\n"
    jpath = tmp_path / f"j.jsonl.{kind}"
    jpath.write_bytes(_compress(judgments, kind))
    assert [j.grade for j in read_judgments(jpath)] == [2]
    bad = tmp_path / f"bad.qrels.{kind}"
    bad.write_bytes(_compress(qrels.read_bytes() + b"q9 0 d9 x\n", kind))
    n = len(qrels.read_text().splitlines()) + 1
    with pytest.raises(InputError, match=rf"bad\.qrels\.{kind}:{n}: grade 'x'"):
        read_qrels(bad)


@pytest.mark.parametrize("kind", ["gz", "xz", "zst"])
def test_evaluate_reads_compressed_runs_and_names_them_by_stem(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = EXAMPLES / "run.bm25.txt"
    packed = tmp_path / f"run.bm25.txt.{kind}"
    packed.write_bytes(_compress(run.read_bytes(), kind))
    qrels = str(_qrels(tmp_path))
    plain = _json(capsys, ["evaluate", qrels, str(run), "--format", "json"])
    assert _json(capsys, ["evaluate", qrels, str(packed), "--format", "json"]) == plain


# FIFOs: read once, same answers --------------------------------------------------------------


def test_evaluate_reads_qrels_and_runs_from_fifos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _qrels(tmp_path)
    runs = [EXAMPLES / "run.bm25.txt", EXAMPLES / "run.weak.txt"]
    want = _json(capsys, ["evaluate", str(qrels), *map(str, runs), "--format", "json"])
    with (
        fifo(tmp_path / "q.fifo", qrels.read_bytes()) as q,
        fifo(tmp_path / "run.bm25.txt", runs[0].read_bytes()) as a,
        fifo(tmp_path / "run.weak.txt.gz", _compress(runs[1].read_bytes(), "gz")) as b,
    ):
        got = _json(capsys, ["evaluate", str(q), str(a), str(b), "--format", "json"])
    assert got == want


def test_evaluate_reads_a_human_csv_fifo_as_qrels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, run = EXAMPLES / "human.csv", EXAMPLES / "run.bm25.txt"
    want = _json(capsys, ["evaluate", str(human), str(run), "--format", "json"])
    with fifo(tmp_path / "human", human.read_bytes()) as h, fifo(tmp_path / "r", run.read_bytes()):
        got = _json(capsys, ["evaluate", str(h), str(tmp_path / "r"), "--format", "json"])
    for record in got:
        record["run"] = "run.bm25"
    assert got == want


def test_a_bad_run_in_a_fifo_is_an_error_naming_it_and_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (EXAMPLES / "run.bm25.txt").read_text().splitlines()
    lines[6] = lines[6].replace("Q0", "Q0 extra", 1).rsplit(" ", 4)[0]  # too few columns
    qrels = _qrels(tmp_path)
    with fifo(tmp_path / "bad", "\n".join(lines).encode() + b"\n") as bad:
        assert main(["evaluate", str(qrels), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:7: expected 6 columns in a run line" in err


def _grades(path: Path) -> list[tuple[str, str, int | None]]:
    return sorted((j.query_id, j.doc_id, j.grade) for j in read_judgments(path))


@pytest.mark.slow
def test_grade_and_calibrate_read_every_input_from_fifos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries, docs, run = (EXAMPLES / n for n in ("queries.tsv", "docs.jsonl", "run.bm25.txt"))
    human = EXAMPLES / "human.csv"

    def grade(q: Path, d: Path, r: Path, out: Path, db: str) -> None:
        argv = ["grade", "--queries", q, "--docs", d, "--run", r, "--judge", "lexical"]
        code = main([str(a) for a in (*argv, "--store", tmp_path / db, "--out", out, "--quiet")])
        assert code == 0, capsys.readouterr().err

    grade(queries, docs, run, tmp_path / "plain.jsonl", "a.db")
    with (
        fifo(tmp_path / "q", queries.read_bytes()) as q,
        fifo(tmp_path / "d", _compress(docs.read_bytes(), "gz")) as d,
        fifo(tmp_path / "r", run.read_bytes()) as r,
    ):
        grade(q, d, r, tmp_path / "fifo.jsonl", "b.db")
    assert _grades(tmp_path / "fifo.jsonl") == _grades(tmp_path / "plain.jsonl")

    base = ["calibrate", "--format", "json"]
    llm = tmp_path / "plain.jsonl"
    want = _json(capsys, [*base, "--llm", str(llm), "--human", str(human), "--run", str(run)])
    with (
        fifo(tmp_path / "llm", llm.read_bytes()) as lf,
        fifo(tmp_path / "human", human.read_bytes()) as hf,
        fifo(tmp_path / "run.bm25.txt", run.read_bytes()) as rf,
    ):
        got = _json(capsys, [*base, "--llm", str(lf), "--human", str(hf), "--run", str(rf)])
    assert got["n"] == want["n"] and got["cohen_kappa"] == want["cohen_kappa"]
    assert got["systems"] == want["systems"]


def test_stdin_may_be_compressed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = EXAMPLES / "run.bm25.txt"
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(_compress(run.read_bytes(), "gz")))
    )
    frame = read_run("-")
    assert frame.drop(columns=[]).to_dict("list") == read_run(run).to_dict("list")


# Process substitution, through a real shell -----------------------------------------------


def _bash(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `command` ("relgrade ...") in bash: the leading command word becomes this Python's
    `-m grader.cli.main`; the rest (paths that may hold "relgrade") is left as written."""
    word, _, rest = command.partition(" ")
    assert word == "relgrade", command
    relgrade = f"{shlex.quote(sys.executable)} -m grader.cli.main"
    return subprocess.run(
        ["bash", "-c", f"{relgrade} {rest}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


pytestmark_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytestmark_bash
@pytest.mark.slow
def test_process_substitution_gives_the_file_answers_and_a_bad_run_exits_2(
    tmp_path: Path,
) -> None:
    qrels = _qrels(tmp_path)
    run = EXAMPLES / "run.bm25.txt"
    (tmp_path / "run.gz").write_bytes(_compress(run.read_bytes(), "gz"))
    bad = tmp_path / "bad.run"
    bad.write_text(run.read_text() + "q9 Q0 d9 1 x t\n")  # a bad score on the last line
    plain = _bash(f"relgrade evaluate {qrels} {run} --format json", tmp_path)
    assert plain.returncode == 0, plain.stderr
    want = [{**r, "run": "-"} for r in json.loads(plain.stdout)]
    for source in (f"<(cat {run})", "<(zcat run.gz)", "<(cat run.gz)"):
        got = _bash(f"relgrade evaluate <(cat {qrels}) {source} --format json", tmp_path)
        assert got.returncode == 0, got.stderr
        assert [{**r, "run": "-"} for r in json.loads(got.stdout)] == want
    failed = _bash(f"relgrade evaluate {qrels} <(cat {bad})", tmp_path)
    n = len(bad.read_text().splitlines())
    assert failed.returncode == 2
    assert f":{n}: score 'x' is not a finite number" in failed.stderr
    assert "/dev/fd/" in failed.stderr and failed.stdout == ""


@pytestmark_bash
@pytest.mark.slow
def test_grade_takes_a_run_through_process_substitution(tmp_path: Path) -> None:
    queries, docs, run = (EXAMPLES / n for n in ("queries.tsv", "docs.jsonl", "run.bm25.txt"))
    out = tmp_path / "j.jsonl"
    done = _bash(
        f"relgrade grade --queries {queries} --docs <(cat {docs}) --run <(cat {run}) "
        f"--judge lexical --store s.db --out {out} --quiet",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    top10 = read_run(run)
    assert len(read_judgments(out)) == int((top10["rank"] <= 10).sum())


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz", "zst"])
def test_outputs_are_written_compressed_as_named_and_read_back(tmp_path: Path, kind: str) -> None:
    from grader.io.trec import write_qrels

    frame = read_qrels(_qrels(tmp_path))
    out = tmp_path / f"out.qrels.{kind}"
    write_qrels(out, frame)
    assert out.read_bytes()[:2] != b"q0"  # not plain text
    assert read_qrels(out).to_dict("list") == frame.to_dict("list")


@pytestmark_bash
@pytest.mark.slow
def test_a_bad_line_in_an_endless_stream_is_named_without_reading_on(tmp_path: Path) -> None:
    qrels = _qrels(tmp_path)
    done = _bash(
        f"relgrade evaluate {qrels} <(echo 'q1 Q0 d1 1 x t'; yes 'q1 Q0 d2 1 1 t')", tmp_path
    )
    assert done.returncode == 2
    assert ":1: score 'x' is not a finite number" in done.stderr
    flat = _bash(f"relgrade evaluate {qrels} <(yes a | tr -d '\\n')", tmp_path)
    assert flat.returncode == 2 and ":1: a line longer than 1 MiB" in flat.stderr
