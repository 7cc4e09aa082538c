"""Issue 9, trustworthy numbers on inputs we did not write: `calibrate` on binary human grades,
a weighted human-vs-human table, one prompt-sha format, one query order, an honest bias verdict.
Every case runs the real CLI (`grader.cli.main`) and checks against scikit-learn where it can."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from calibration.stats.bias import LENIENCY_MARGIN, verdict
from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files
from tests.helpers.calibrate_files import Rows, calibrate_json, write_grades_csv, write_qrels_rows

# 5. A sizeable bias whose interval spans both signs is inconclusive, not balanced.


def test_a_bias_whose_interval_spans_both_signs_is_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four queries: the LLM grades two of them 2-3 points up, one 1 point down, one as people do,
    # so the query bootstrap's interval of the mean bias runs from below 0 to far above.
    human: Rows = []
    llm: Rows = []
    shift = {"q0": 3, "q1": 2, "q2": -1, "q3": 0}
    for q, s in shift.items():
        for d in range(5):
            h = 0 if s > 0 else (1 if s < 0 else d % 4)
            human.append((q, f"{q}d{d}", h))
            llm.append((q, f"{q}d{d}", h + s))
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    argv = ["--llm", str(lp), "--human", str(hp), "--bootstrap", "500"]
    out = calibrate_json(capsys, argv)
    bias = out["mean_bias"]
    lo, hi = out["intervals"]["mean_bias"]
    assert bias == pytest.approx(
        np.mean([m - h for (_, _, h), (_, _, m) in zip(human, llm, strict=True)])
    )
    assert bias >= LENIENCY_MARGIN and lo < 0 < hi  # sizeable, yet the sign is not known
    assert out["verdict"]["label"] == "inconclusive"
    assert "inconclusive" in out["verdict"]["text"] and "balanced" not in out["verdict"]["text"]
    assert main(["calibrate", *argv]) == 0
    assert "Verdict: Whether the LLM judge is lenient or strict is inconclusive" in (
        " ".join(capsys.readouterr().out.split())
    )


def test_verdict_labels_at_the_documented_bounds() -> None:
    m = LENIENCY_MARGIN
    assert verdict(0.57, [-0.42, 1.58], None, None)["label"] == "inconclusive"  # the case
    assert verdict(0.3, [-0.05, 0.6], None, None)["label"] == "inconclusive"  # sizeable, 0 inside
    assert verdict(0.02, [-2 * m, 2 * m], None, None)["label"] == "inconclusive"  # both signs
    assert verdict(0.02, [-0.05, 0.3], None, None)["label"] == "inconclusive"  # reaches +0.3
    assert verdict(-0.09, [-0.35, 0.05], None, None)["label"] == "inconclusive"  # issue 29
    assert verdict(0.05, [0.01, 0.12], None, None)["label"] == "inconclusive"  # 0 out, > m in
    assert verdict(0.02, [-0.05, 0.05], None, None)["label"] == "balanced"
    assert verdict(-0.09, [-0.099, -0.02], None, None)["label"] == "balanced"  # within +-m
    assert verdict(0.57, [0.2, 0.9], None, None)["label"] == "lenient"
    assert verdict(-0.57, [-0.9, -0.2], None, None)["label"] == "strict"
    assert verdict(0.57, None, None, None)["label"] == "lenient"  # no bootstrap: bias decides


# 2. --second-human: weighted like the main table, mean bias labelled per column.


def test_human_vs_human_is_weighted_like_the_main_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    a: Rows = []
    b: Rows = []
    llm: Rows = []
    probs = []
    for i in range(120):
        q, d = f"q{i % 8}", f"d{i}"
        g = int(rng.integers(0, 4))
        a.append((q, d, g))
        b.append((q, d, g if rng.random() < 0.6 else int(rng.integers(0, 4))))
        m = min(3, g + int(rng.integers(0, 2))) if g < 2 else int(rng.integers(0, 4))
        llm.append((q, d, m))
        probs.append(0.05 if g >= 2 else 0.5)  # a stratified sample: rare grades drawn more
    hp = write_grades_csv(tmp_path / "alice.csv", a)
    bp = write_grades_csv(tmp_path / "bob.csv", b)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    manifest = {
        "strategy": "stratified",
        "seed": 1,
        "population": 5000,
        "pairs": [
            {"query_id": q, "doc_id": d, "inclusion_probability": p}
            for (q, d, _), p in zip(a, probs, strict=True)
        ],
    }
    (tmp_path / "alice.manifest.json").write_text(json.dumps(manifest))
    argv = ["--llm", str(lp), "--human", str(hp), "--second-human", str(bp), "--bootstrap", "0"]
    out = calibrate_json(capsys, argv)
    hh = out["human_vs_human"]
    assert out["weighted"] is True and hh["weighted"] is True and hh["n"] == 120
    # The same pairs as the main table, so the LLM column must equal it figure for figure.
    for key in ("exact_agreement", "cohen_kappa", "weighted_kappa_quadratic", "mean_bias"):
        assert hh["llm"][key] == pytest.approx(out[key], abs=1e-12)
    w = 1 / np.array(probs)
    ga, gb = np.array([g for *_, g in a]), np.array([g for *_, g in b])
    assert hh["humans"]["cohen_kappa"] == pytest.approx(
        cohen_kappa_score(ga, gb, sample_weight=w), abs=1e-12
    )
    assert hh["humans"]["exact_agreement"] == pytest.approx(np.average(ga == gb, weights=w))
    assert hh["humans"]["exact_agreement"] != pytest.approx(np.mean(ga == gb))
    assert hh["humans"]["mean_bias"] == pytest.approx(np.average(gb - ga, weights=w))
    assert main(["calibrate", *argv]) == 0
    table = capsys.readouterr().out
    assert "(weighted by the sample manifest, as above)" in " ".join(table.split())
    lines = {line.split("│")[1].strip(): line for line in table.splitlines() if "│" in line}
    cells = [c.strip() for c in lines["mean bias (LLM - human A)"].split("│")[1:-1]]
    assert cells == ["mean bias (LLM - human A)", "", f"{hh['llm']['mean_bias']:.4f}"]
    cells = [c.strip() for c in lines["mean bias (human B - human A)"].split("│")[1:-1]]
    assert cells == ["mean bias (human B - human A)", f"{hh['humans']['mean_bias']:.4f}", ""]


# 4. One query order: evaluate and the calibration report list numeric ids by number.


def _report_query_ids(path: Path) -> list[str]:
    """The first cell of each row of the report's per-query table, in page order."""
    from html.parser import HTMLParser

    class PerQuery(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.inside = self.first = False
            self.cell = 0
            self.ids: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "table":
                self.inside = ("id", "per-query") in attrs
            elif self.inside and tag == "tr":
                self.cell = 0
            elif self.inside and tag == "td":
                self.cell += 1
                self.first = self.cell == 1

        def handle_endtag(self, tag: str) -> None:
            if tag == "table":
                self.inside = False
            if tag == "td":
                self.first = False

        def handle_data(self, data: str) -> None:
            if self.inside and self.first:
                self.ids.append(data)

    parser = PerQuery()
    parser.feed(path.read_text())
    return parser.ids


@pytest.mark.parametrize(
    ("ids", "expected"),
    [(["100", "2", "10"], ["2", "10", "100"]), (["q2", "q100", "q10"], ["q10", "q100", "q2"])],
)
def test_report_and_evaluate_list_queries_in_one_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ids: list[str], expected: list[str]
) -> None:
    human: Rows = [(q, f"d{i}", i % 4) for q in ids for i in range(4)]
    llm: Rows = [(q, d, (g + 1) % 4) for q, d, g in human]
    hp = write_qrels_rows(tmp_path / "human.qrels", human)  # file order: 100, 2, 10
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    report = tmp_path / "report.html"
    argv = ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0", "--report", str(report)]
    out = calibrate_json(capsys, argv)
    assert [q["query_id"] for q in out["per_query"]] == expected
    assert _report_query_ids(report) == expected
    run = tmp_path / "run.txt"
    run.write_text("".join(f"{q} Q0 {d} 1 {9 - int(d[1:])} r\n" for q, d, _ in reversed(human)))
    assert main(["evaluate", str(hp), str(run), "-m", "RR", "--per-query", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["query_id"] for r in records if r["query_id"] != "all"] == expected


def test_query_order_is_numeric_only_when_every_id_is_a_whole_number() -> None:
    from grader.metrics.query_order import sort_query_ids

    assert sort_query_ids(["100", "2", "10"]) == ["2", "10", "100"]
    assert sort_query_ids(["100", "2", "10", "x"]) == ["10", "100", "2", "x"]
    assert sort_query_ids(["01", "1", "002"]) == ["01", "1", "002"]  # equal numbers: by text
    assert sort_query_ids(["-1", "2"]) == ["-1", "2"]  # a sign is not a whole number: text


# 3. One prompt-sha format (bare hex) for every judge; content keys and the cache unchanged.

HEX64 = r"[0-9a-f]{64}"


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fixes")
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


def _store_rows(db: Path) -> dict[str, tuple[str | None, str]]:
    import sqlite3

    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT key, prompt_sha, judgment FROM judgment_rows").fetchall()
    con.close()
    return {key: (sha, judgment) for key, sha, judgment in rows}


@pytest.mark.usefixtures("llm_env")
def test_llm_and_lexical_judgments_record_the_prompt_sha_alike(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    import hashlib
    import re

    from grader.io.judgments import read_judgments
    from grader.keys import content_key
    from grader.prompts import load_prompt

    files = write_grade_files(tmp_path)
    lexical, llm = tmp_path / "lexical.jsonl", tmp_path / "llm.jsonl"
    store = str(tmp_path / "s.db")
    assert (
        main(files.args("--judge", "lexical", "--store", store, "--out", lexical, "--quiet")) == 0
    )
    argv = ["--base-url", fake_server.base_url, "--model", "m", "--prompt", "passage-v1"]
    assert main(files.args(*argv, "--store", store, "--out", llm, "--quiet")) == 0
    shas = {
        j.judge: j.prompt.sha256
        for path in (lexical, llm)
        for j in read_judgments(path)
        if j.prompt is not None
    }
    assert len(shas) == 2 and all(re.fullmatch(HEX64, sha) for sha in shas.values())
    assert {sha for sha, _ in _store_rows(Path(store)).values()} == set(shas.values())
    # The LLM judgment's key is the one stores have always held: the fingerprint hashes the
    # prompt file's bare hex digest (computed here from the file's bytes).
    spec = load_prompt("passage-v1")
    file_hex = hashlib.sha256(Path(spec.source).read_bytes()).hexdigest()
    j = read_judgments(llm)[0]
    fingerprint = {
        "judge": j.judge,
        "model": "m",
        "prompt": file_hex,
        "sampling": spec.sampling(),
    }
    texts = {
        line.split("\t")[0]: line.split("\t")[1] for line in files.queries.read_text().splitlines()
    }
    docs = {json.loads(x)["doc_id"]: json.loads(x) for x in files.docs.read_text().splitlines()}
    assert shas[j.judge] == file_hex
    assert j.key == content_key(fingerprint, texts[j.query_id], docs[j.doc_id]["text"])


def test_a_store_with_the_old_tagged_lexical_sha_is_still_all_cached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.io.judgments import read_judgments
    from tests.old_stores import Row, write_old_store

    files = write_grade_files(tmp_path)
    new, db = tmp_path / "new.db", tmp_path / "s.db"
    out = tmp_path / "j.jsonl"
    assert main(files.args("--judge", "lexical", "--store", new, "--quiet")) == 0
    before = _store_rows(new)

    def tagged(row: Row) -> Row:
        """The row as the lexical judge wrote it before: `sha256:<hex>` in both places."""
        sha = row[7]
        old = json.loads(row[12])
        old["prompt"]["sha256"] = f"sha256:{sha}"
        return (*row[:7], f"sha256:{sha}", *row[8:12], json.dumps(old))

    write_old_store(db, 7, new, edit=tagged)
    capsys.readouterr()
    assert main(files.args("--judge", "lexical", "--store", db, "--out", out, "--quiet")) == 0
    assert f"graded 0, cached {files.n_pairs}, failed 0" in capsys.readouterr().err
    assert set(_store_rows(db)) == set(before)  # same content keys, no new rows
    fresh = {j.key: j.prompt.sha256 for j in read_judgments(out) if j.prompt is not None}
    assert fresh == {key: sha for key, (sha, _) in before.items()}  # read back as bare hex


# 1. People graded 0/1, the LLM 0..3: the scales differ, compare at the matching split.


@pytest.mark.parametrize("threshold", [2, 3])
def test_binary_human_grades_are_compared_at_the_matching_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], threshold: int
) -> None:
    rng = np.random.default_rng(11)
    human: Rows = []
    llm: Rows = []
    for i in range(200):
        q, d = f"q{i % 10}", f"d{i}"
        rel = int(rng.random() < 0.4)
        grade = int(rng.integers(2, 4)) if rel else int(rng.integers(0, 2))
        if rng.random() < 0.2:
            grade = int(rng.integers(0, 4))
        human.append((q, d, rel))
        llm.append((q, d, grade))
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    report = tmp_path / "report.html"
    argv = ["--llm", str(lp), "--human", str(hp), "--threshold", str(threshold)]
    argv += ["--bootstrap", "200", "--report", str(report)]
    assert main(["calibrate", *argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "warning: human grades are binary (0/1) but LLM grades use 0..3" in captured.err
    assert out["warnings"] and "scales differ" in out["warnings"][0]
    h = np.array([g for *_, g in human])
    m = np.array([g for *_, g in llm])
    b = out["binary_scale"]
    assert b["threshold"] == threshold
    assert b["cohen_kappa"] == pytest.approx(cohen_kappa_score(h, m >= threshold), abs=1e-12)
    assert b["exact_agreement"] == pytest.approx(np.mean(h == (m >= threshold)))
    assert b["human_relevant"] == pytest.approx(np.mean(h))  # not 0%: a human 1 is relevant
    assert b["llm_relevant"] == pytest.approx(np.mean(m >= threshold))
    assert np.array(b["confusion"]).sum() == len(human)
    lo, hi = b["intervals"]["cohen_kappa"]
    assert lo < b["cohen_kappa"] < hi
    # The contract's 4x4 confusion stays, rows 2 and 3 empty: people never used those grades.
    assert np.array(out["confusion"]).shape == (4, 4) and sum(map(sum, out["confusion"][2:])) == 0
    assert out["verdict"]["label"] == "scales_differ"
    assert f"{np.mean(h):.0%} (grade 1)" in out["verdict"]["text"]
    page = report.read_text()
    assert page.index('id="binary-confusion"') < page.index('id="confusion"')
    assert f'<span id="binary_cohen_kappa">{b["cohen_kappa"]:.4f}</span>' in page
    assert main(["calibrate", *argv]) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert table.startswith(
        f"Binary comparison (human 1 = relevant; LLM relevant when grade >= {threshold})"
    )
    assert table.index("Binary comparison") < table.index("Agreement on 200 pairs")
    assert "for reference only: human grades are 0/1" in table


def test_graded_human_grades_get_no_scale_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows: Rows = [(f"q{i % 3}", f"d{i}", i % 4) for i in range(24)]
    hp = write_grades_csv(tmp_path / "human.csv", rows)
    lp = write_qrels_rows(tmp_path / "llm.qrels", [(q, d, (g + 1) % 4) for q, d, g in rows])
    assert main(["calibrate", "--llm", str(lp), "--human", str(hp), "--format", "json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["binary_scale"] is None and out["warnings"] == [] and "warning" not in captured.err


def test_binary_human_grades_count_as_relevant_in_the_ppi_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # People graded half the pairs 0/1 (1 = relevant), the LLM all of them 0..3: the PPI++
    # relevant share must read a human 1 as relevant, not call every human pair irrelevant.
    human: Rows = []
    llm: Rows = []
    for q in range(6):
        for k in range(10):
            g = (q + k) % 4
            llm.append((f"q{q}", f"d{q}_{k}", g))
            if k < 5:
                human.append((f"q{q}", f"d{q}_{k}", int(g >= 2)))
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    out = calibrate_json(
        capsys, ["--llm", str(lp), "--human", str(hp), "--no-manifest", "--bootstrap", "50"]
    )
    share = out["estimates"]["relevant_share"]
    assert out["binary_scale"] is not None
    assert share["human_only"] == pytest.approx(np.mean([g for *_, g in human]))
    assert share["ppi_ci"][0] <= np.mean([g >= 2 for *_, g in llm]) <= share["ppi_ci"][1]
    assert "human grade >= 1" in share["estimand"]


@pytest.mark.parametrize("grade", [{"choices": ["2", "0"]}, ["2", "0"]])
def test_a_json_min_record_with_two_grades_is_an_error_not_its_first(
    tmp_path: Path, grade: object
) -> None:
    from calibration.spotcheck.labelstudio_import import read_labelstudio_export
    from grader.errors import InputError

    path = tmp_path / "export.json"
    path.write_text(json.dumps([{"query_id": "q1", "doc_id": "d1", "grade": grade, "id": 1}]))
    with pytest.raises(InputError, match="several grades"):
        read_labelstudio_export(path, None)
