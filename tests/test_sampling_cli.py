"""`relgrade sample`: blind CSV + manifest from judgments, exclusions, import back with checks."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from calibration.spotcheck.manifest import read_manifest
from grader.cli.main import main
from grader.io.judgments import read_judgments
from tests.helpers.fill_data import DATA as SHARED_DL2019
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import make_judgment, population


def _inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    pop = population({0: 40, 1: 20, 2: 10, 3: 6}, queries=4)
    pop += [make_judgment("q0", "dfail", None)]
    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, pop)
    queries = tmp_path / "q.tsv"
    queries.write_text("".join(f"q{i}\tquery text {i}\n" for i in range(4)))
    docs = tmp_path / "d.jsonl"
    lines = [
        json.dumps({"doc_id": j.doc_id, "text": f"body of {j.doc_id}", "title": f"T {j.doc_id}"})
        for j in pop
    ]
    docs.write_text("\n".join(lines) + "\n")
    return judgments, queries, docs


def _sample(tmp_path: Path, *extra: str) -> tuple[int, Path]:
    judgments, queries, docs = _inputs(tmp_path)
    out = tmp_path / "sample.csv"
    argv = ["sample", "--judgments", str(judgments), "--queries", str(queries)]
    argv += ["--docs", str(docs), "--out", str(out), *extra]
    for flag, value in (("--n", "12"), ("--strategy", "stratified"), ("--seed", "4")):
        if flag not in extra:  # a flag given twice is an error: `extra` overrides by leaving out
            argv += [flag, value]
    return main(argv), out


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_sample_writes_a_blind_csv_and_its_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _sample(tmp_path)
    assert code == 0
    said = capsys.readouterr().out
    assert "1 failed judgment(s)" in said and "sampled 12 of 76" in said
    rows = _rows(out)
    assert list(rows[0]) == ["query_id", "doc_id", "query", "title", "document", "grade", "notes"]
    assert len(rows) == 12
    assert all(r["grade"] == "" and r["notes"] == "" for r in rows)
    assert rows[0]["document"] == f"body of {rows[0]['doc_id']}"
    text = out.read_text()
    assert "grade=" not in text and "stratum" not in text
    manifest = read_manifest(tmp_path / "sample.manifest.json")
    assert manifest.population == 76 and manifest.strategy == "stratified"
    assert manifest.excluded == {"failed": 1, "human_graded": 0}
    assert manifest.source is not None and manifest.source.sha256.startswith("sha256:")
    assert [(r["query_id"], r["doc_id"]) for r in rows] == [
        (p.query_id, p.doc_id) for p in manifest.pairs
    ]
    # doc ids are numbered by LLM grade; the row order must not follow them
    numbers = [int(r["doc_id"][1:]) for r in rows]
    assert numbers != sorted(numbers)


def test_same_seed_gives_the_same_file(tmp_path: Path) -> None:
    _, out = _sample(tmp_path)
    first = out.read_text()
    _, out = _sample(tmp_path)
    assert out.read_text() == first


def test_pairs_people_graded_are_left_out(tmp_path: Path) -> None:
    human = tmp_path / "human.csv"
    human.write_text("query_id,doc_id,grade\n" + "".join(f"q{i % 4},d{i},1\n" for i in range(60)))
    code, out = _sample(tmp_path, "--exclude", str(human))
    assert code == 0
    assert all(int(r["doc_id"][1:]) >= 60 for r in _rows(out))
    assert read_manifest(tmp_path / "sample.manifest.json").population == 16


def test_without_texts_the_sample_is_drawn_with_ids_and_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judgments, _, _ = _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)  # no relgrade.db here
    argv = ["sample", "--judgments", str(judgments), "--n", "3", "--out", str(tmp_path / "s.csv")]
    assert main(argv) == 0
    assert "--queries Q --docs D or --store DB" in capsys.readouterr().err
    rows = _rows(tmp_path / "s.csv")
    assert len(rows) == 3 and all(r["doc_id"] and r["document"] == "" for r in rows)


def test_texts_come_from_the_default_store_when_present(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.io.docs import read_docs, read_queries
    from grader.store.store import Store
    from grader.store.writing import text_rows

    judgments, queries, docs = _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    with Store(tmp_path / "relgrade.db") as store:
        store.put_text_rows(*text_rows(read_queries(queries).values(), read_docs(docs).values()))
    argv = ["sample", "--judgments", str(judgments), "--n", "3", "--out", str(tmp_path / "s.csv")]
    assert main(argv) == 0
    assert "texts taken from the store relgrade.db" in capsys.readouterr().err
    rows = _rows(tmp_path / "s.csv")
    assert all(r["document"] == f"body of {r['doc_id']}" for r in rows)


def test_queries_without_docs_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments, queries, _ = _inputs(tmp_path)
    argv = ["sample", "--judgments", str(judgments), "--queries", str(queries), "--n", "3"]
    assert main([*argv, "--out", str(tmp_path / "s.csv")]) == 2
    assert "--queries and --docs go together" in capsys.readouterr().err


def test_uncertainty_without_logprobs_suggests_another_strategy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _sample(tmp_path, "--strategy", "uncertainty")
    assert code == 2
    assert "use --strategy stratified" in capsys.readouterr().err


def _fill(path: Path, grade_of: dict[int, str] | None = None) -> Path:
    rows = _rows(path)
    for i, r in enumerate(rows):
        r["grade"] = (grade_of or {}).get(i, str(i % 4))
    filled = path.with_name("filled.csv")
    with filled.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return filled


def test_import_filled_csv_writes_human_grades_with_the_manifest_beside(tmp_path: Path) -> None:
    _, out = _sample(tmp_path)
    filled = _fill(out)
    human = tmp_path / "human.csv"
    manifest = tmp_path / "sample.manifest.json"
    argv = ["sample", "--import", str(filled), "--manifest", str(manifest), "--out", str(human)]
    assert main(argv) == 0
    rows = _rows(human)
    assert len(rows) == 12 and {r["grade"] for r in rows} == {"0", "1", "2", "3"}
    assert (tmp_path / "human.manifest.json").read_text() == manifest.read_text()


@pytest.mark.parametrize(
    ("grade_of", "message"),
    [
        ({3: "4"}, "filled.csv:5: grade '4' is not one of 0, 1, 2, 3"),
        ({3: "inf"}, "filled.csv:5: grade 'inf' is not one of 0, 1, 2, 3"),
        ({3: "1e999"}, "filled.csv:5: grade '1e999' is not one of 0, 1, 2, 3"),
        ({2: ""}, "no grade"),
    ],
)
def test_import_refuses_bad_grades_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], grade_of: dict[int, str], message: str
) -> None:
    _, out = _sample(tmp_path)
    filled = _fill(out, grade_of)
    argv = ["sample", "--import", str(filled), "--manifest", str(tmp_path / "sample.manifest.json")]
    assert main([*argv, "--out", str(tmp_path / "h.csv")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "h.csv").exists()


def test_import_refuses_a_pair_not_in_the_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = _sample(tmp_path)
    filled = _fill(out)
    filled.write_text(filled.read_text() + "q9,dzz,query,T,doc,2,\n")
    argv = ["sample", "--import", str(filled), "--manifest", str(tmp_path / "sample.manifest.json")]
    assert main([*argv, "--out", str(tmp_path / "h.csv")]) == 2
    assert "filled.csv:14: pair (q9, dzz) is not in the sample" in capsys.readouterr().err


def test_import_without_any_manifest_says_how_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = _sample(tmp_path)
    filled = _fill(out)
    assert main(["sample", "--import", str(filled), "--out", str(tmp_path / "h.csv")]) == 2
    assert "--manifest" in capsys.readouterr().err


def test_the_loop_sample_grade_import_calibrate_is_weighted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _sample(tmp_path)
    assert code == 0
    filled = _fill(out)
    human = tmp_path / "human.csv"
    manifest = tmp_path / "sample.manifest.json"
    argv = ["sample", "--import", str(filled), "--manifest", str(manifest), "--out", str(human)]
    assert main(argv) == 0
    capsys.readouterr()
    judgments = tmp_path / "j.jsonl"
    argv = ["calibrate", "--llm", str(judgments), "--human", str(human), "--format", "json"]
    assert main([*argv, "--bootstrap", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 12
    assert report["manifest"].endswith("human.manifest.json")
    assert report["weighted_n"] == pytest.approx(76)  # weights sum back to the population


def test_a_whole_queries_sample_gives_per_run_estimates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _sample(tmp_path, "--strategy", "whole-queries", "--n", "40")
    assert code == 0
    rows = _rows(out)
    assert len({r["query_id"] for r in rows}) == 2  # round(40 * 4 / 76) whole queries
    human = tmp_path / "human.csv"
    manifest = tmp_path / "sample.manifest.json"
    argv = ["sample", "--import", str(_fill(out)), "--manifest", str(manifest)]
    assert main([*argv, "--out", str(human)]) == 0
    judgments = read_judgments(tmp_path / "j.jsonl")
    run = tmp_path / "sys.run"
    run.write_text(
        "".join(
            f"{j.query_id} Q0 {j.doc_id} {i + 1} {100 - i} sys\n" for i, j in enumerate(judgments)
        )
    )
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(tmp_path / "j.jsonl"), "--human", str(human)]
    assert main([*argv, "--run", str(run), "--format", "json", "--bootstrap", "0"]) == 0
    est = json.loads(capsys.readouterr().out)["estimates"]["runs"]["sys"]
    assert est["n_labelled"] == 2 and est["n_unlabelled"] == 2
    assert est["ppi"] is not None and est["human_only"] is not None
    assert est["ppi_ci"][0] <= est["ppi"] <= est["ppi_ci"][1]


def test_labelstudio_tasks_and_config_carry_the_prompt_scale(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    code, out = _sample(tmp_path, "--labelstudio", str(tasks), "--prompt", "passage")
    assert code == 0
    data = json.loads(tasks.read_text())
    assert [(t["data"]["query_id"], t["data"]["doc_id"]) for t in data] == [
        (r["query_id"], r["doc_id"]) for r in _rows(out)
    ]
    assert "Perfectly relevant" in (tmp_path / "tasks.config.xml").read_text()


def test_query_balanced_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _sample(tmp_path, "--strategy", "query-balanced")
    assert code == 0
    per_query = Counter(r["query_id"] for r in _rows(out))
    assert sorted(per_query.values()) == [3, 3, 3, 3]
    assert "q0: 3 drawn of 19" in capsys.readouterr().out


DATA = SHARED_DL2019


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="TREC DL 2019 data is not present")
def test_the_loop_on_trec_dl_2019(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Real LLM labels as judgments -> blind sample with real passages -> NIST grades typed in
    -> import -> calibrate, weighted back to all 9,260 pairs."""
    from grader.io.trec import read_qrels

    llm = read_qrels(DATA / "llm-labels" / "dl2019_test_4prompts_llama70b.txt")
    human = read_qrels(DATA / "2019qrels-pass.txt")
    nist = {(q, d): int(g) for q, d, g in human[["query_id", "doc_id", "grade"]].itertuples(False)}
    judgments = tmp_path / "judgments.jsonl"
    write_judgments(
        judgments, (make_judgment(q, d, int(g)) for q, d, g in llm.itertuples(index=False))
    )
    out = tmp_path / "sample.csv"
    argv = ["sample", "--judgments", str(judgments), "--n", "120", "--strategy", "stratified"]
    argv += ["--queries", str(DATA / "msmarco-test2019-queries.tsv")]
    argv += ["--docs", str(DATA / "dl2019_document.jsonl"), "--seed", "11", "--out", str(out)]
    assert main(argv) == 0
    rows = _rows(out)
    assert len(rows) == 120 and all(r["query"] and r["document"] for r in rows)
    for r in rows:
        r["grade"] = str(nist[(r["query_id"], r["doc_id"])])
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    manifest = str(tmp_path / "sample.manifest.json")
    human_csv = tmp_path / "human.csv"
    assert (
        main(["sample", "--import", str(filled), "--manifest", manifest, "--out", str(human_csv)])
        == 0
    )
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(judgments), "--human", str(human_csv), "--format", "json"]
    assert main([*argv, "--bootstrap", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 120
    assert report["weighted_n"] == pytest.approx(len(llm))


def test_many_strata_of_one_size_are_worded_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, population({0: 100, 1: 60, 2: 30, 3: 10}, queries=20))
    argv = ["sample", "--judgments", str(judgments), "--n", "50", "--strategy", "whole-queries"]
    assert main([*argv, "--seed", "1", "--out", str(tmp_path / "s.csv")]) == 0
    assert "  20 strata of 10 pairs each; pairs drawn from 5 of them" in capsys.readouterr().out
