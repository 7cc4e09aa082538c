"""`relgrade calibrate` end to end: JSON keys of DESIGN.md, tables, manifest weighting,
estimates when people graded part of the pairs, errors, the real data. (With runs:
tests/test_calibrate_runs.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from grader.cli.main import main
from tests.helpers.calibrate_files import (
    calibrate_json,
    noisy_grades,
    write_grades_csv,
    write_qrels_rows,
)
from tests.helpers.fill_data import DATA as SHARED_DL2019
from tests.helpers.params import quick_first

DATA = SHARED_DL2019
REQUIRED = {
    "n",
    "exact_agreement",
    "within_one",
    "cohen_kappa",
    "weighted_kappa_linear",
    "weighted_kappa_quadratic",
    "krippendorff_alpha_ordinal",
    "binary_kappa",
    "confusion",
    "mean_bias",
}


def test_json_has_the_design_keys_and_reference_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(1)
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    out = calibrate_json(capsys, ["--llm", str(lp), "--human", str(hp), "--bootstrap", "200"])
    assert set(out) >= REQUIRED
    h = [g for *_, g in human]
    m = [g for *_, g in llm]
    assert out["n"] == len(h)
    assert out["cohen_kappa"] == pytest.approx(cohen_kappa_score(h, m))
    assert out["weighted_kappa_quadratic"] == pytest.approx(
        cohen_kappa_score(h, m, weights="quadratic", labels=[0, 1, 2, 3])
    )
    assert set(out["binary_kappa"]) == {"1", "2", "3"}
    assert np.array(out["confusion"]).shape == (4, 4)
    assert out["mean_bias"] == pytest.approx(np.mean(np.array(m) - np.array(h)))
    assert out["weighted"] is False and out["manifest"] is None
    lo, hi = out["intervals"]["cohen_kappa"]
    assert lo < out["cohen_kappa"] < hi
    assert len(out["per_query"]) == 12
    assert "estimates" not in out  # people graded every LLM-graded pair
    assert out["verdict"]["label"] in {"lenient", "strict", "balanced"}
    assert any("--docs" in note for note in out["notes"])


def test_same_seed_same_intervals_other_seed_other_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(2)
    args = ["--llm", str(write_qrels_rows(tmp_path / "l.txt", llm))]
    args += ["--human", str(write_qrels_rows(tmp_path / "h.txt", human)), "--bootstrap", "300"]
    a = calibrate_json(capsys, [*args, "--seed", "4"])["intervals"]
    b = calibrate_json(capsys, [*args, "--seed", "4"])["intervals"]
    c = calibrate_json(capsys, [*args, "--seed", "5"])["intervals"]
    assert a == b
    assert a != c


def test_partial_human_grades_give_estimates_and_one_side_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(3, n_queries=20)
    part = [row for row in human if int(row[0][1:]) < 8] + [("q99", "extra", 1)]
    out = calibrate_json(
        capsys,
        [
            "--llm",
            str(write_qrels_rows(tmp_path / "l.txt", llm)),
            "--human",
            str(write_grades_csv(tmp_path / "h.csv", part)),
            "--bootstrap",
            "100",
        ],
    )
    assert out["counts"] == {
        "paired": 8 * 15,
        "llm_only": 12 * 15,
        "human_only": 1,
        "queries": 8,
    }
    share = out["estimates"]["relevant_share"]
    assert set(share) >= {"llm_only", "human_only", "ppi", "ppi_ci"}
    assert share["ppi_ci"][0] <= share["ppi"] <= share["ppi_ci"][1]
    llm_grades = np.array([g for *_, g in llm])
    assert share["llm_only"] == pytest.approx(np.mean(llm_grades >= 2))


def test_manifest_beside_the_human_file_weights_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(4)
    hp = write_grades_csv(tmp_path / "sample.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.txt", llm)
    plain = calibrate_json(capsys, ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0"])
    probs = [0.1 if g >= 2 else 0.5 for *_, g in human]
    manifest = {
        "strategy": "stratified",
        "seed": 1,
        "population": 1000,
        "pairs": [
            {"query_id": q, "doc_id": d, "inclusion_probability": p}
            for (q, d, _), p in zip(human, probs, strict=True)
        ],
    }
    (tmp_path / "sample.manifest.json").write_text(json.dumps(manifest))
    weighted = calibrate_json(capsys, ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0"])
    assert weighted["weighted"] is True
    assert weighted["manifest"].endswith("sample.manifest.json")
    h = [g for *_, g in human]
    m = [g for *_, g in llm]
    w = 1 / np.array(probs)
    assert weighted["cohen_kappa"] == pytest.approx(cohen_kappa_score(h, m, sample_weight=w))
    assert weighted["cohen_kappa"] != pytest.approx(plain["cohen_kappa"])
    ignored = calibrate_json(
        capsys, ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0", "--no-manifest"]
    )
    assert ignored["cohen_kappa"] == pytest.approx(plain["cohen_kappa"])


def test_table_output_is_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    human, llm = noisy_grades(5)
    code = main(
        [
            "calibrate",
            "--llm",
            str(write_qrels_rows(tmp_path / "l.txt", llm)),
            "--human",
            str(write_qrels_rows(tmp_path / "h.txt", human)),
            "--bootstrap",
            "50",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Cohen's kappa" in out and "Confusion" in out and "Verdict:" in out


def test_out_of_range_grade_is_an_error_unless_clamped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(6)
    llm[3] = (llm[3][0], llm[3][1], 5)
    lp = write_qrels_rows(tmp_path / "l.txt", llm)
    hp = write_qrels_rows(tmp_path / "h.txt", human)
    assert main(["calibrate", "--llm", str(lp), "--human", str(hp)]) == 2
    err = capsys.readouterr().err
    assert "l.txt:4" in err
    out = calibrate_json(
        capsys, ["--llm", str(lp), "--human", str(hp), "--clamp", "--bootstrap", "0"]
    )
    assert out["n"] == len(human)


def test_clamped_and_ungraded_rows_are_reported_as_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(6)
    llm[3] = (llm[3][0], llm[3][1], 5)
    human[0] = (human[0][0], human[0][1], -1)
    lp = write_qrels_rows(tmp_path / "l.txt", llm)
    hp = write_grades_csv(tmp_path / "h.csv", human)
    hp.write_text(hp.read_text() + "q0,extra1,\nq0,extra2,\n")
    argv = ["--llm", str(lp), "--human", str(hp), "--clamp", "--bootstrap", "0"]
    out = calibrate_json(capsys, argv)
    assert "1 grades outside 0..3 in --llm were clamped (--clamp)" in out["notes"]
    assert "1 grades outside 0..3 in --human were clamped (--clamp)" in out["notes"]
    assert "2 rows in --human have an empty grade and were left out" in out["notes"]
    assert main(["calibrate", *argv]) == 0
    table = capsys.readouterr().out
    assert "in --llm were clamped" in table and "have an empty grade" in " ".join(table.split())


def test_no_common_pair_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lp = write_qrels_rows(tmp_path / "l.txt", [("q1", "a", 1)])
    hp = write_qrels_rows(tmp_path / "h.txt", [("q2", "b", 1)])
    assert main(["calibrate", "--llm", str(lp), "--human", str(hp)]) == 2
    assert "no (query_id, doc_id) pair" in capsys.readouterr().err


def test_docs_give_bias_by_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    human, llm = noisy_grades(7)
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"doc_id": d, "text": "word " * (i % 50 + 1)}) + "\n"
            for i, (_, d, _) in enumerate(human)
        )
    )
    out = calibrate_json(
        capsys,
        [
            "--llm",
            str(write_qrels_rows(tmp_path / "l.txt", llm)),
            "--human",
            str(write_qrels_rows(tmp_path / "h.txt", human)),
            "--docs",
            str(docs),
            "--bootstrap",
            "0",
        ],
    )
    rows = out["bias_by_length"]
    assert len(rows) == 5
    assert sum(r["n"] for r in rows) == len(human)
    assert rows[0]["high"] < rows[-1]["low"]


REFERENCE = [  # from the data's README
    ("dl2019_test_4prompts_flant5large", 0.2272, 0.4477),
    ("dl2019_test_4prompts_llama70b", 0.1666, 0.4611),
    ("dl2019_test_baseline_relavance_qrel_prompt_order_3210", 0.1284, 0.3221),
    ("dl2019_sun_then_decomposed_relavance_qrel", 0.1688, 0.3759),
    ("dl2019_test_sun_then_decomposed_flant5large", 0.1867, 0.4416),
]


@pytest.mark.skipif(not DATA.exists(), reason="TREC DL 2019 data absent")
@pytest.mark.parametrize(("name", "kappa", "qwk"), quick_first(REFERENCE))
def test_real_data_prints_the_reference_kappas(
    name: str, kappa: float, qwk: float, capsys: pytest.CaptureFixture[str]
) -> None:
    llm = DATA / "llm-labels" / f"{name}.txt"
    human = DATA / "2019qrels-pass.txt"
    out = calibrate_json(capsys, ["--llm", str(llm), "--human", str(human), "--bootstrap", "0"])
    assert out["n"] == 9260
    assert out["counts"]["llm_only"] == out["counts"]["human_only"] == 0
    assert round(out["cohen_kappa"], 4) == kappa
    assert round(out["weighted_kappa_quadratic"], 4) == qwk
    assert main(["calibrate", "--llm", str(llm), "--human", str(human), "--bootstrap", "0"]) == 0
    table = capsys.readouterr().out
    assert f"{kappa:.4f}" in table and f"{qwk:.4f}" in table


def test_missing_report_folder_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = noisy_grades(12, n_queries=3, per_query=5)
    argv = ["calibrate", "--llm", str(write_qrels_rows(tmp_path / "l.txt", llm))]
    argv += ["--human", str(write_qrels_rows(tmp_path / "h.txt", human))]
    assert main([*argv, "--report", str(tmp_path / "nope" / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_judgments_jsonl_with_logprobs_and_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.models import Judgment, JudgmentError
    from tests.helpers.judgments import write_judgments

    rng = np.random.default_rng(13)
    human, judgments = [], []
    for i in range(60):
        h = int(rng.integers(0, 4))
        sure = rng.random() < 0.5
        g = h if sure or rng.random() < 0.3 else (h + 1) % 4
        dist = np.full(4, 0.02 if sure else 0.15)
        dist[g] = 0.94 if sure else 0.55
        human.append((f"q{i % 6}", f"d{i}", h))
        judgments.append(
            Judgment(
                query_id=f"q{i % 6}",
                doc_id=f"d{i}",
                grade=g,
                status="ok",
                judge="m",
                key=f"k{i}",
                distribution=list(dist / dist.sum()),
                expected_grade=float(np.dot(np.arange(4), dist / dist.sum())),
            )
        )
    judgments.append(
        Judgment(
            query_id="q0",
            doc_id="d999",
            status="failed",
            judge="m",
            key="kf",
            error=JudgmentError(type="InvalidReply", message="no grade"),
        )
    )
    jp = tmp_path / "judgments.jsonl"
    write_judgments(jp, judgments)
    hp = write_grades_csv(tmp_path / "h.csv", [*human, ("q0", "d999", 2)])
    out = calibrate_json(capsys, ["--llm", str(jp), "--human", str(hp), "--bootstrap", "0"])
    assert out["n"] == 60  # the failed judgment is never a grade
    assert out["counts"]["human_only"] == 1
    assert any("1 failed judgments" in note for note in out["notes"])
    conf = out["confidence"]
    bins = conf["by_confidence"]
    assert sum(b["n"] for b in bins) == 60
    # the judge is right more often when it is sure
    assert bins[-1]["exact_agreement"] > bins[0]["exact_agreement"]
    assert conf["expected_calibration_error"] >= 0
    assert conf["expected_grade_mae"] is not None


@pytest.mark.slow
def test_grader_library_never_imports_calibration() -> None:
    # DESIGN.md: only the command line ties grader and calibration together
    import ast

    root = Path(__file__).resolve().parents[1] / "grader"
    offenders = []
    for path in root.rglob("*.py"):
        if "cli" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] == "calibration"]
    assert offenders == []
