"""`relgrade grade` on real TREC DL 2019 passages (skipped when the data is absent): a run made
from the human qrels of a few queries, graded offline by the lexical judge, then an unchanged
rerun that is answered wholly from the store, and --skip-judged leaving nothing to grade."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels
from tests.helpers.fill_data import DATA as SHARED_DL2019

DATA = SHARED_DL2019
pytestmark = [
    pytest.mark.skipif(not DATA.exists(), reason="TREC DL 2019 data absent"),
    pytest.mark.slow,
]


def test_lexical_grading_of_real_passages_and_cached_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = read_qrels(DATA / "2019qrels-pass.txt")
    qids = sorted(qrels["query_id"].unique())[:4]
    run = tmp_path / "run.txt"
    with run.open("w") as fh:
        for qid in qids:
            rows = qrels[qrels["query_id"] == qid].reset_index(drop=True)
            for i, row in rows.iterrows():
                fh.write(f"{qid} Q0 {row['doc_id']} {i + 1} {row['grade'] + 1 / (i + 2)} qrun\n")
    judged = tmp_path / "judged.txt"
    sub = qrels[qrels["query_id"].isin(qids)]
    judged.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in sub.itertuples(index=False)))
    base = [
        "grade",
        "--queries",
        str(DATA / "msmarco-test2019-queries.tsv"),
        "--docs",
        str(DATA / "dl2019_document.jsonl"),
        "--run",
        str(run),
        "--judge",
        "lexical",
        "--store",
        str(tmp_path / "s.db"),
        "--quiet",
    ]
    out = tmp_path / "j.jsonl"
    assert main([*base, "--out", str(out)]) == 0
    judgments = read_judgments(out)
    assert len(judgments) == 4 * 10
    assert all(j.status == "ok" and j.query_id in qids for j in judgments)
    capsys.readouterr()
    assert main(base) == 0
    assert "graded 0, cached 40, failed 0" in capsys.readouterr().err
    assert main([*base, "--skip-judged", str(judged)]) == 0
    assert "graded 0, cached 0, failed 0" in capsys.readouterr().err
