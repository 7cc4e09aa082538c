"""The block reader of runs (grader/io/run_stream.py) against the whole-file reader and pytrec_eval.

`relgrade evaluate` reads runs block by block and keeps only judged rows; `evaluate()` reads them
whole (`read_run`) and joins. Both must give the same judged rows, ranks, grades, returned counts
and errors on every input, with queries straddling blocks (tiny blocks here), ties, comments,
extra columns, unknown queries and depth cutoffs; files the block reader does not take as is
(irregular whitespace, a query's lines apart, a duplicate, a bad score) go to `read_run`.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from grader.cli.main import main
from grader.errors import InputError
from grader.io import run_stream
from grader.io.run_stream import judged_run
from grader.io.trec import read_qrels, read_run
from grader.metrics import evaluate, mean_scores, parse_measure
from grader.metrics.evaluate import depth_needed, score
from grader.metrics.join_arrow import join, judgments_of
from grader.metrics.judged_rows import Ranked
from tests.helpers.params import quick_first


def _random_files(
    folder: Path, seed: int, *, comments: bool = False, extra: bool = False
) -> tuple[Path, Path]:
    """Qrels and a grouped run with tied scores, unknown queries and unjudged documents
    (`comments`: with comment lines; `extra`: a few lines with columns after the sixth)."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(int(rng.integers(3, 12))):
        docs = [f"d{int(d)}" for d in rng.choice(60, size=int(rng.integers(1, 40)), replace=False)]
        judged = rng.choice(docs + [f"u{i}" for i in range(5)], size=len(docs) // 2 + 1)
        for d in dict.fromkeys(judged):
            qrels.append(f"q{q} 0 {d} {int(rng.integers(-1, 4))}")
        if rng.random() < 0.2:
            continue  # a judged query the run does not answer
        for rank, d in enumerate(docs, 1):
            tag = " extra col" if extra and rng.random() < 0.05 else ""
            run.append(f"q{q} Q0 {d} {rank} {float(rng.integers(0, 6)) / 2} tag{tag}")
            if comments and rng.random() < 0.05:
                run.append("# a comment line")
    run += [f"stray{i} Q0 d{i} 1 1.0 tag" for i in range(int(rng.integers(0, 3)))]
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    qrels_path.write_text("\n".join(qrels) + "\n")
    run_path.write_text("\n".join(run) + ("\n" if run else ""))
    return qrels_path, run_path


def _same(a: Ranked, b: Ranked) -> None:
    assert a.query_ids == b.query_ids
    for field in ("query", "rank", "grade", "returned", "ideal_query", "ideal_grade", "ideal_pos"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.unjudged_queries == b.unjudged_queries


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 256 bytes: most rankings straddle two or more blocks."""
    monkeypatch.setattr(run_stream, "BLOCK", 256)


@pytest.fixture
def no_whole_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if the block reader hands the file to `read_run`."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run was read whole")

    monkeypatch.setattr(run_stream, "read_run", refuse)


@pytest.mark.slow
@pytest.mark.parametrize("seed", quick_first(range(12), 4))  # 0-3: every comments/extra mix
@pytest.mark.parametrize("depth", [None, 1, 3, 10])
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_blocks_equal_the_whole_file_join(
    tmp_path: Path, tiny_blocks: None, seed: int, depth: int | None, precision: str
) -> None:
    qrels_path, run_path = _random_files(
        tmp_path, seed, comments=seed % 2 == 0, extra=seed % 3 == 0
    )
    qrels = read_qrels(qrels_path, any_grade=True)
    whole = read_run(run_path, precision=precision)  # type: ignore[arg-type]
    expected = join(qrels, whole, precision=precision, depth=depth)  # type: ignore[arg-type]
    got = judged_run(run_path, judgments_of(qrels), precision=precision, depth=depth)  # type: ignore[arg-type]
    _same(got.ranked, expected)
    assert got.rows == len(whole)


def test_regular_files_are_never_read_whole(
    tmp_path: Path, tiny_blocks: None, no_whole_read: None
) -> None:
    for seed in range(6):
        qrels_path, run_path = _random_files(tmp_path, seed, comments=True)
        judged_run(run_path, judgments_of(read_qrels(qrels_path, any_grade=True)))


def test_ties_across_block_ends_follow_trec_eval_order(tmp_path: Path, tiny_blocks: None) -> None:
    """300 docs of one query, all tied: ranked by doc id descending, as trec_eval ranks them."""
    docs = [f"doc{i:03d}" for i in range(300)]
    (tmp_path / "run.txt").write_text("".join(f"q1 Q0 {d} 1 7.5 t\n" for d in docs))
    (tmp_path / "qrels.txt").write_text("q1 0 doc000 2\nq1 0 doc150 1\nq1 0 doc299 3\n")
    judged = judgments_of(read_qrels(tmp_path / "qrels.txt", any_grade=True))
    ranked = judged_run(tmp_path / "run.txt", judged).ranked
    assert ranked.rank.tolist() == [1, 150, 300]  # doc299, doc150, doc000
    assert ranked.grade.tolist() == [3, 1, 2]
    assert ranked.returned.tolist() == [300]


def test_means_agree_with_pytrec_eval(tmp_path: Path, tiny_blocks: None) -> None:
    measures = [parse_measure(m) for m in ("nDCG@10", "P(rel=1)@5", "R(rel=1)@20", "AP(rel=1)")]
    names = {"ndcg_cut_10": 0, "P_5": 1, "recall_20": 2, "map": 3}
    for seed in range(8):
        qrels_path, run_path = _random_files(tmp_path, seed)
        qrels = read_qrels(qrels_path, any_grade=True)
        run = judged_run(run_path, judgments_of(qrels), depth=depth_needed(measures))
        got = score(run.ranked, measures, missing="skip")
        with open(qrels_path) as fh:
            ref_qrels = pytrec_eval.parse_qrel(fh)
        with open(run_path) as fh:
            ref_run = pytrec_eval.parse_run(fh)
        wanted = {"ndcg_cut.10", "P.5", "recall.20", "map"}
        ref = pytrec_eval.RelevanceEvaluator(ref_qrels, wanted, relevance_level=1).evaluate(ref_run)
        for name, row in names.items():
            expected = {q: v[name] for q, v in ref.items()}
            values = dict(zip(got.query_ids, got.values[row].tolist(), strict=True))
            assert values == pytest.approx(expected, abs=1e-9), (seed, name)


@pytest.mark.parametrize(
    "text",
    [
        "q1 Q0 a 1 2.0 t\nq2 Q0 b 1 2.0 t\nq1 Q0 c 2 1.0 t\n",  # q1's lines apart
        "q1 Q0 a 1 2.0 t\nq1  Q0 c 2 3.0 t\nq2\tQ0 b 1 2.0 t\n",  # irregular whitespace
        "\ufeffq1 Q0 a 1 2.0 t\nq1 Q0 c 2 3.0 t\n",  # a byte order mark
        "",  # empty
    ],
)
def test_files_it_does_not_take_are_read_whole_with_the_same_answer(
    tmp_path: Path, tiny_blocks: None, text: str
) -> None:
    (tmp_path / "run.txt").write_text(text)
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq1 0 c 2\nq2 0 b 3\n")
    qrels = read_qrels(tmp_path / "qrels.txt", any_grade=True)
    whole = read_run(tmp_path / "run.txt")
    got = judged_run(tmp_path / "run.txt", judgments_of(qrels))
    _same(got.ranked, join(qrels, whole))
    assert got.rows == len(whole)


@pytest.mark.parametrize(
    ("data", "words", "line"),
    [
        (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 a 3 0.5 t\n", "lines 1 and 3", 3),
        (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2 nan t\n", "not a finite number", 2),
        (b"q1 Q0 a 1 2.0 t\nq1 Q0 b 2\n", "expected 6 columns", 2),
        (b"q1 Q0 a 1 2.0 t\nq1 Q0 b\xff 2 1.0 t\n", "UTF-8", 2),
    ],
)
def test_errors_are_read_runs_errors(tmp_path: Path, data: bytes, words: str, line: int) -> None:
    path = tmp_path / "run.txt"
    path.write_bytes(data)
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\n")
    judged = judgments_of(read_qrels(tmp_path / "qrels.txt", any_grade=True))
    with pytest.raises(InputError) as whole:
        read_run(path)
    with pytest.raises(InputError) as blocks:
        judged_run(path, judged)
    assert str(blocks.value) == str(whole.value)
    assert words in str(blocks.value)
    assert blocks.value.line == line


def test_stdin_run_and_its_errors_are_named_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq1 0 b 3\n")
    judged = judgments_of(read_qrels(tmp_path / "qrels.txt", any_grade=True))
    stdin = io.BytesIO(b"q1 Q0 a 1 1.0 t\nq1 Q0 b 2 2.0 t\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    run = judged_run("-", judged)
    assert run.rows == 2
    assert run.ranked.grade.tolist() == [3, 1]  # b scores higher: rank 1
    with pytest.raises(InputError) as bad:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"q1 Q0 a 1 x t\n")))
        judged_run("-", judged)
    assert bad.value.path is not None and str(bad.value.path) == "stdin"
    assert bad.value.line == 1


def test_runs_with_extra_columns_on_every_line_are_read_in_blocks(
    tmp_path: Path, tiny_blocks: None, no_whole_read: None
) -> None:
    qrels_path, run_path = _random_files(tmp_path, 3)
    wide = tmp_path / "wide.txt"
    wide.write_text("".join(line + " x 7\n" for line in run_path.read_text().splitlines()))
    qrels = read_qrels(qrels_path, any_grade=True)
    got = judged_run(wide, judgments_of(qrels))
    _same(got.ranked, join(qrels, read_run(run_path)))


def test_cli_json_equals_the_library_evaluate(
    tmp_path: Path, tiny_blocks: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """`relgrade evaluate` (blocks) prints what `evaluate()` (whole file) computes, per query."""
    names = ["nDCG@10", "RR(rel=1)", "P(rel=2)@5", "AP(rel=1)", "Judged@3", "NumRet"]
    for seed in range(4):
        qrels_path, run_path = _random_files(tmp_path, seed, comments=True)
        argv = ["evaluate", str(qrels_path), str(run_path), "-m", *names]
        assert main([*argv, "--per-query", "--format", "json"]) == 0
        records = json.loads(capsys.readouterr().out)
        got = {(r["query_id"], r["measure"]): r["value"] for r in records if r["query_id"] != "all"}
        frame = evaluate(read_qrels(qrels_path, any_grade=True), read_run(run_path), names)
        expected = {(q, m): v for q, m, v in frame.itertuples(index=False)}
        assert got == pytest.approx(expected, abs=0, rel=0)
        means = {r["measure"]: r["value"] for r in records if r["query_id"] == "all"}
        assert means == pytest.approx(dict(mean_scores(frame).itertuples(index=False)), rel=0)
