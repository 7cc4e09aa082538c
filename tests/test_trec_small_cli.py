"""`relgrade evaluate` with the plain-Python reader of small TREC files on and off: the same
output, stderr and exit code on the small files it takes and those it hands to the Arrow readers,
on generated files and on TREC DL 2019; small files never import Arrow, large ones no pandas."""

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
from grader.evaluation import files as evaluate_files
from grader.io import trec_small
from grader.io.trec_small import small_judged_run
from grader.metrics.judged_rows import JudgedRun
from tests.helpers.fill_data import DATA
from tests.helpers.params import quick_first
from tests.helpers.trec_small_files import (
    NOT_TAKEN,
    QRELS,
    RUN,
    TAKEN,
    compare_readers,
    generated_files,
)

ROOT = Path(__file__).resolve().parents[1]
DL2019 = DATA  # found as the other tests find it, from a worktree too


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
    qrels, run = generated_files(tmp_path, 1000 + seed)
    argv = [str(qrels), str(run), *MEASURES, "--per-query", "--format", "csv"]
    _both(monkeypatch, capsys, argv)


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
        assert compare_readers(qrels, run, precision, depth) == (True, True)
    argv = [str(qrels), str(run), *MEASURES, "--per-query", "--format", "json"]
    code, out, _ = _both(monkeypatch, capsys, argv)
    assert code == 0 and len(json.loads(out)) > 43 * 8


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


@pytest.mark.slow
def test_small_files_never_import_arrow_and_large_ones_no_pandas(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    assert _loaded_in_child(tmp_path / "qrels.txt", tmp_path / "run.txt", plain=True) == []
    assert _loaded_in_child(tmp_path / "qrels.txt", tmp_path / "run.txt", plain=False) == [
        "pyarrow"
    ]
