"""`grade --skip-judged HUMAN_QRELS` on top of people's labels, through the command line: the
holes report, `--merged-out` (human ∪ LLM on holes, people's grades as written, `--llm-scale`),
`source` per judgment line, `--also-judged` with its manifest (found by calibrate), failed
judgments staying holes, and bad human qrels."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from grader.cli.main import main
from grader.errors import InputError
from grader.evaluation.fill.scores import evaluate_fill
from grader.io.grades import parse_llm_scale
from grader.io.trec import read_qrels, read_run
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files

# 4 queries x 6 ranked docs; people graded ranks 1, 3, 5 of each query on a 0..4 scale, and
# one pair no run returns.
HUMAN = "".join(f"q{q} 0 d{q * 6 + r} {(q + r) % 5}\n" for q in range(4) for r in (0, 2, 4))
HUMAN += "q0 0 d99 2\n"


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=4, depth=6)


@pytest.fixture
def human(tmp_path: Path) -> Path:
    path = tmp_path / "human.qrels"
    path.write_text(HUMAN)
    return path


def _lines(path: Path) -> set[tuple[str, str, int]]:
    frame = read_qrels(path, any_grade=True)
    return set(zip(frame["query_id"], frame["doc_id"], frame["grade"].tolist(), strict=True))


def test_llm_scale_parses_and_refuses_gaps() -> None:
    assert parse_llm_scale("0:0,1:1,2:4,3:7") == {0: 0, 1: 1, 2: 4, 3: 7}
    for bad in ("0:0,1:1,2:2", "0:0,1:1,2:2,3:3,3:4", "0:0,1:1,2:2,4:3", "a:b"):
        with pytest.raises(InputError, match="--llm-scale"):
            parse_llm_scale(bad)


def test_holes_report_merge_and_source_per_line(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, llm, merged = tmp_path / "j.jsonl", tmp_path / "llm.qrels", tmp_path / "merged.qrels"
    args = files.args(
        "--judge",
        "lexical",
        "--store",
        tmp_path / "s.db",
        "--quiet",
        "--skip-judged",
        human,
        "--out",
        out,
        "--qrels-out",
        llm,
        "--merged-out",
        merged,
        "--llm-scale",
        "0:0,1:1,2:3,3:4",
    )
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "pairs 24: judged by people 12, holes 12 (sent 12, cached 0)" in err
    assert "1 human-graded pairs are not in the runs' top --depth" in err
    assert "--llm-scale 0:0,1:1,2:3,3:4" in err
    scale = {0: 0, 1: 1, 2: 3, 3: 4}
    llm_grades = _lines(llm)
    assert len(llm_grades) == 12
    expected = _lines(human) | {(q, d, scale[g]) for q, d, g in llm_grades}
    assert _lines(merged) == expected  # people's 0..4 as written, the pair never retrieved kept
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["source"] for r in records} == {"llm"} and len(records) == 12
    # A rerun sends nothing and writes the same merged qrels.
    assert main(args) == 0
    assert "holes 12 (sent 0, cached 12)" in capsys.readouterr().err
    assert _lines(merged) == expected


def test_also_judged_draws_n_writes_a_manifest_and_calibrate_finds_it(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, merged = tmp_path / "j.jsonl", tmp_path / "merged.qrels"
    args = files.args(
        "--judge",
        "lexical",
        "--store",
        tmp_path / "s.db",
        "--quiet",
        "--skip-judged",
        human,
        "--out",
        out,
        "--merged-out",
        merged,
        "--also-judged",
        "4",
        "--stratify",
        "--seed",
        "3",
    )
    assert main(args) == 0
    assert "judged by people 12 (4 of them graded by the LLM too" in capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    also = {(r["query_id"], r["doc_id"]) for r in records if r["source"] == "human"}
    assert len(also) == 4 and len(records) == 16
    people = {(q, d): g for q, d, g in _lines(human)}
    assert also <= set(people)
    # The merged qrels are people's lines and the LLM's grade of each hole, each pair once:
    # people's grade on the also-judged pairs, whatever the LLM said of them.
    holes = {(r["query_id"], r["doc_id"], r["grade"]) for r in records if r["source"] == "llm"}
    assert len(holes) == 12 and not {(q, d) for q, d, _ in holes} & set(people)
    lines = merged.read_text().splitlines()
    assert len(lines) == len(set(lines)) == len(people) + 12
    assert _lines(merged) == set(_lines(human)) | holes
    manifest = json.loads((tmp_path / "j.manifest.json").read_text())
    assert manifest["kind"] == "also-judged" and manifest["population"] == 12
    drawn = {(p["query_id"], p["doc_id"]): p["inclusion_probability"] for p in manifest["pairs"]}
    assert set(drawn) == also
    sizes = {k: v["size"] for k, v in manifest["strata"].items()}
    for (q, d), pi in drawn.items():  # equal allocation over the human grades
        stratum = f"human grade {people[q, d]}"
        assert pi == pytest.approx(manifest["strata"][stratum]["expected"] / sizes[stratum])
    capsys.readouterr()
    code = main(
        ["calibrate", "--llm", str(out), "--human", str(human), "--clamp", "--format", "json"]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == 4 and result["weighted"] is True
    assert any("also-judged: 4 pairs drawn" in note for note in result["notes"])


def test_also_judged_larger_than_the_judged_pool_is_refused(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = files.args(
        "--judge",
        "lexical",
        "--store",
        tmp_path / "s.db",
        "--quiet",
        "--skip-judged",
        human,
        "--out",
        tmp_path / "j.jsonl",
        "--also-judged",
        "13",
    )
    assert main(args) == 2
    assert "only 12 pairs of the runs' top --depth are judged" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_failed_llm_judgments_stay_holes_in_the_merged_qrels(
    fake_server: FakeServer,
    files: GradeFiles,
    human: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    merged, out = tmp_path / "merged.qrels", tmp_path / "j.jsonl"
    fake_server.enqueue(faults.bad_grade(7), faults.refusal())
    args = files.args(
        "--base-url",
        fake_server.base_url,
        "--store",
        tmp_path / "s.db",
        "--quiet",
        "--max-attempts",
        "1",
        "--concurrency",
        "1",
        "--skip-judged",
        human,
        "--merged-out",
        merged,
        "--out",
        out,
    )
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "holes 12 (sent 12, cached 0); 2 failed (no grade: they stay holes" in err
    assert fake_server.counts["requests"] == 12
    failed = [json.loads(x) for x in out.read_text().splitlines()]
    failed_ids = {(r["query_id"], r["doc_id"]) for r in failed if r["status"] == "failed"}
    assert len(failed_ids) == 2
    # A failed hole keeps source "llm" (human | llm, DESIGN.md) with no grade: never a 0.
    sources = {(r["status"], r["source"], r["grade"]) for r in failed if r["status"] == "failed"}
    assert sources == {("failed", "llm", None)}
    merged_ids = {(q, d) for q, d, _ in _lines(merged)}
    assert not failed_ids & merged_ids
    assert len(merged_ids) == 13 + 10


def test_duplicate_human_line_is_an_error_naming_the_lines(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human.write_text(HUMAN + "q1 0 d6 3\n")
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    assert main([*args, "--skip-judged", str(human), "--merged-out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"{human}:14" in err and "d6" in err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("x1 0 d0 1\nx2 0 d1 0\n", "shares no query id with the runs"),
        ("q0 0 other-1 1\nq1 0 other-2 0\n", "holds none of the runs' 24 pairs"),
    ],
)
def test_qrels_of_another_collection_is_an_error(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    other = tmp_path / "other.qrels"
    other.write_text(text)
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    assert main([*args, "--skip-judged", str(other), "--merged-out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert says in err and "another collection" in err and str(other) in err


def test_merge_flags_need_one_skip_judged(files: GradeFiles, tmp_path: Path) -> None:
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    assert main([*args, "--merged-out", str(tmp_path / "m")]) == 2


def test_evaluate_fill_weights_the_overlap_by_the_manifest_beside_the_judgments(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "j.jsonl"
    args = files.args(
        "--judge", "lexical", "--store", tmp_path / "s.db", "--quiet", "--skip-judged", human,
        "--out", out, "--also-judged", "6", "--stratify",
    )  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    argv = ["evaluate", str(human), str(files.run), "--fill", str(out), "-m", "P(rel=2)@5"]
    assert main([*argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert f"weighted by 1/pi from {tmp_path / 'j.manifest.json'}" in captured.err
    filled = [r for r in json.loads(captured.out) if r["regime"] == "filled" and "ci_low" in r]
    assert len(filled) == 1
    got = (filled[0]["corrected"], filled[0]["ci_low"], filled[0]["ci_high"])
    # The same interval by hand: each pair graded by both weighted by 1 / its pi in the
    # manifest; with the weights left out (all 1) it is another interval.
    manifest = json.loads((tmp_path / "j.manifest.json").read_text())
    weights = {(p["query_id"], p["doc_id"]): 1 / p["inclusion_probability"]
               for p in manifest["pairs"]}  # fmt: skip
    assert len(set(weights.values())) > 1  # stratified: the pi differ
    records = [json.loads(line) for line in out.read_text().splitlines()]
    llm = pd.DataFrame(records)[["query_id", "doc_id", "grade"]]
    people = read_qrels(human, any_grade=True)
    run = {files.run.stem: read_run(files.run)}

    def interval(given: dict[tuple[str, str], float] | None) -> tuple[float, float, float]:
        found = evaluate_fill(people, llm, run, ["P(rel=2)@5"], weights=given).intervals
        one = found[files.run.stem]["P(rel=2)@5"]
        return one.estimate, one.low, one.high

    assert got == pytest.approx(interval(weights), abs=1e-12)
    assert got != pytest.approx(interval(None), abs=1e-6)


def test_dry_run_reports_the_holes_it_would_send(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    assert main([*args, "--skip-judged", str(human), "--dry-run"]) == 0
    assert "holes 12 (to send 12, cached 0)" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def test_skip_missing_counts_the_skipped_holes_in_the_summary(
    files: GradeFiles, human: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = [x for x in files.docs.read_text().splitlines() if json.loads(x)["doc_id"] not in
            ("d1", "d3")]  # fmt: skip
    files.docs.write_text("".join(f"{x}\n" for x in kept))  # two holes of q0 lose their doc
    merged = tmp_path / "merged.qrels"
    args = files.args(
        "--judge", "lexical", "--store", tmp_path / "s.db", "--quiet", "--skip-judged", human,
        "--merged-out", merged, "--skip-missing",
    )  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "holes 12 (sent 10, cached 0, skipped 2: unknown query or doc id" in err
    assert ("q0", "d1") not in {(q, d) for q, d, _ in _lines(merged)}


def test_the_manifest_is_written_before_the_outputs(
    files: GradeFiles, human: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import grader.job.people as people

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("the process dies here")

    monkeypatch.setattr(people, "merged_lines", crash)
    out, merged = tmp_path / "j.jsonl", tmp_path / "merged.qrels"
    args = files.args(
        "--judge", "lexical", "--store", tmp_path / "s.db", "--quiet", "--skip-judged", human,
        "--out", out, "--merged-out", merged, "--also-judged", "4",
    )  # fmt: skip
    with pytest.raises(OSError, match="dies here"):
        main(args)
    manifest = tmp_path / "j.manifest.json"
    assert out.exists() and manifest.exists() and not merged.exists()
    marker = json.loads((tmp_path / ".j.jsonl.relgrade-outputs.json").read_text())
    assert str(manifest) in marker["targets"] and str(manifest) in marker["written"]
    assert str(merged) not in marker["written"]
