"""Samples graded in their draw order: `sample --strategy active` and the draw probabilities it
records, and calibrate's confidence sequence of the graded prefix (docs/spot-checks-that-stop.md).

The sequence's figures are checked against a plain loop over the grades (Des Raj's terms and the
normal-mixture boundary written out one grade at a time), not against the library's own
vectorised code.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration.spotcheck.manifest import read_manifest
from calibration.spotcheck.sampling import draw_sample
from calibration.stats import confseq
from calibration.stats.ppi import ppi_mean
from grader.cli.main import main
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import population


def _judgments(tmp_path: Path) -> Path:
    pop = population({0: 120, 1: 60, 2: 40, 3: 30}, queries=10, with_distribution=True)
    path = tmp_path / "j.jsonl"
    write_judgments(path, pop)
    return path


def _sample(tmp_path: Path, strategy: str, n: int = 80) -> tuple[Path, Any]:
    out = tmp_path / "sample.csv"
    argv = ["sample", "--judgments", str(_judgments(tmp_path)), "--n", str(n)]
    argv += ["--strategy", strategy, "--seed", "3", "--out", str(out)]
    assert main(argv) == 0
    return out, read_manifest(tmp_path / "sample.manifest.json")


def _human(tmp_path: Path, manifest: Any, k: int, seed: int = 1) -> Path:
    """People grade the first k pairs of the sample's order (their grade: LLM's +- 1 at times)."""
    rng = np.random.default_rng(seed)
    llm = {(j["query_id"], j["doc_id"]): j["grade"] for j in _read_jsonl(tmp_path / "j.jsonl")}
    path = tmp_path / "human.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["query_id", "doc_id", "grade"])
        for pair in manifest.pairs[:k]:
            g = llm[(pair.query_id, pair.doc_id)] + int(rng.choice([-1, 0, 0, 1]))
            writer.writerow([pair.query_id, pair.doc_id, min(3, max(0, g))])
    (tmp_path / "human.manifest.json").write_text((tmp_path / "sample.manifest.json").read_text())
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _calibrate(tmp_path: Path, human: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(tmp_path / "j.jsonl"), "--human", str(human)]
    assert main([*argv, "--format", "json", "--bootstrap", "0"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_active_sample_draws_uncertain_pairs_more_often_and_records_its_order(
    tmp_path: Path,
) -> None:
    _, manifest = _sample(tmp_path, "active")
    assert manifest.strategy == "active" and manifest.sequential()
    assert manifest.uniform_share == 0.5 and manifest.variance_factor > 1
    p = [pair.draw_probability for pair in manifest.pairs]
    unc = [pair.uncertainty for pair in manifest.pairs]
    assert all(0 < x <= 1 for x in p) and len(p) == 80
    # P(relevant) r's expected squared error r (1 - r): the confidence-0.3 pairs are drawn sooner
    pop = population({0: 120, 1: 60, 2: 40, 3: 30}, queries=10, with_distribution=True)
    rel = np.array([sum(j.distribution[2:]) for j in pop])  # type: ignore[index]
    assert np.mean(unc) > np.mean(rel * (1 - rel))
    # the first draw's probability is its weight over the total, the weights being >= 0.5 mean
    assert 0.5 / 250 <= p[0] <= 1.5 / 250 * 2


def test_a_uniform_sample_records_successive_draw_probabilities(tmp_path: Path) -> None:
    _, manifest = _sample(tmp_path, "uniform")
    p = [pair.draw_probability for pair in manifest.pairs]
    assert p == pytest.approx([1 / (250 - t) for t in range(80)])


def _by_hand(
    y: list[float], f: list[float], p: list[float], f_all: list[float], factor: float
) -> tuple[float, float]:
    """Des Raj terms and the normal-mixture boundary, one grade at a time."""
    n_pop, f_total = len(f_all), sum(f_all)
    z = []
    for t in range(len(y)):
        c = lam = 0.0
        if t >= confseq.MIN_LAMBDA_GRADES:
            v = [1 / (n_pop * p[j]) / ((n_pop - j) * p[j]) for j in range(t)]
            sv = sum(v)
            my = sum(v[j] * y[j] for j in range(t)) / sv
            mf = sum(v[j] * f[j] for j in range(t)) / sv
            cov = sum(v[j] * y[j] * f[j] for j in range(t)) / sv - my * mf
            var = sum(v[j] * f[j] * f[j] for j in range(t)) / sv - mf * mf
            lam = min(1.0, max(0.0, cov / var)) if var > 1e-9 else 0.0
            c = my - lam * mf
        past = sum(y[j] - c - lam * f[j] for j in range(t))
        z.append((c * n_pop + lam * f_total + past + (y[t] - c - lam * f[t]) / p[t]) / n_pop)
    t = len(z)
    mean = sum(z) / t
    k = confseq.PRIOR_GRADES * min(1.0, confseq.PRIOR_UNTIL / t)
    var = (k * confseq.PRIOR_VARIANCE * factor + sum((x - mean) ** 2 for x in z)) / (t + k)
    rho2 = (-2 * math.log(0.05) + math.log(-2 * math.log(0.05) + 1)) / confseq.T_STAR
    half = math.sqrt(var) * math.sqrt(
        2 * (t * rho2 + 1) / (t * t * rho2) * math.log(math.sqrt(t * rho2 + 1) / 0.05)
    )
    return mean, half


@pytest.mark.parametrize("strategy", ["uniform", "active"])
def test_calibrate_reports_the_sequence_of_the_graded_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str
) -> None:
    _, manifest = _sample(tmp_path, strategy)
    human = _human(tmp_path, manifest, 60)
    share = _calibrate(tmp_path, human, capsys)["estimates"]["relevant_share"]
    lines = _read_jsonl(tmp_path / "j.jsonl")
    llm = {(j["query_id"], j["doc_id"]): j["grade"] for j in lines}
    # the judgments carry grade distributions: the correction uses P(grade >= 2)
    rel = {(j["query_id"], j["doc_id"]): sum(j["distribution"][2:]) for j in lines}
    graded = {(r["query_id"], r["doc_id"]): int(r["grade"]) for r in csv.DictReader(human.open())}
    pairs = [(q.query_id, q.doc_id) for q in manifest.pairs[:60]]
    mean, half = _by_hand(
        [float(graded[k] >= 2) for k in pairs],
        [rel[k] for k in pairs],
        [q.draw_probability for q in manifest.pairs[:60]],
        list(rel.values()),
        manifest.variance_factor or 1.0,
    )
    assert share["llm_only"] == pytest.approx(np.mean([g >= 2 for g in llm.values()]))
    assert share["cs_n"] == 60 and share["cs_estimate"] == pytest.approx(mean)
    assert share["cs"] == pytest.approx([max(0, mean - half), min(1, mean + half)])
    more = share["more_for_0_05"]
    sd = half / float(confseq.boundary(60))
    needed = confseq.more_for(0.05, 60, sd)
    assert sd * float(confseq.boundary(60 + needed)) <= 0.05 < sd * confseq.boundary(59 + needed)
    assert more == min(needed, len(llm) - 60)  # never more than the pairs left to grade
    if strategy == "active":  # the fixed-n figures: Des Raj's terms with (c, lambda) fitted on all
        assert share["ppi"] == pytest.approx(_fixed_by_hand(pairs, graded, rel, manifest))
    else:  # PPI++ with the same prediction
        others = [k for k in rel if k not in graded]
        y = np.array([float(graded[k] >= 2) for k in graded])
        expected = ppi_mean(
            y, np.array([rel[k] for k in graded]), np.array([rel[k] for k in others])
        )
        assert share["ppi"] == pytest.approx(expected.ppi)


def _fixed_by_hand(pairs: list[Any], graded: Any, rel: Any, manifest: Any) -> float:
    """The least-squares fit of a_t on (1, b_t, d_t), written out: its intercept."""
    n_pop, f_total = len(rel), sum(rel.values())
    rows, a = [], []
    sum_y = sum_f = 0.0
    for j, (key, pair) in enumerate(zip(pairs, manifest.pairs, strict=False)):
        y, f, p = float(graded[key] >= 2), rel[key], pair.draw_probability
        a.append((sum_y + y / p) / n_pop)
        rows.append([1.0, (j + 1 / p - n_pop) / n_pop, (sum_f + f / p - f_total) / n_pop])
        sum_y, sum_f = sum_y + y, sum_f + f
    coef = np.linalg.lstsq(np.array(rows), np.array(a), rcond=None)[0]
    return float(coef[0])


def test_a_gap_in_the_order_stops_the_prefix_and_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, manifest = _sample(tmp_path, "uniform")
    human = _human(tmp_path, manifest, 40)
    rows = human.read_text().splitlines()
    del rows[1 + 20]  # the 21st pair of the order is not graded
    human.write_text("\n".join(rows) + "\n")
    share = _calibrate(tmp_path, human, capsys)["estimates"]["relevant_share"]
    assert share["cs_n"] == 20
    assert "19 later grade(s) count once pair 21" in share["cs_note"]


def test_no_sequence_for_a_stratified_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, manifest = _sample(tmp_path, "stratified")
    share = _calibrate(tmp_path, _human(tmp_path, manifest, 60), capsys)["estimates"]
    assert "cs" not in share["relevant_share"]


@pytest.mark.slow
def test_the_sequence_in_the_terminal_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, manifest = _sample(tmp_path, "active")
    human = _human(tmp_path, manifest, 50)
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(tmp_path / "j.jsonl"), "--human", str(human)]
    report = tmp_path / "report.html"
    assert main([*argv, "--bootstrap", "0", "--report", str(report)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    sentence = "Anytime-valid 95% confidence sequence after the first 50 graded pairs"
    assert sentence in said
    assert sentence in " ".join(report.read_text().split())


def test_sample_draw_is_reproducible_and_every_prefix_distinct() -> None:
    pop = population({0: 50, 1: 30, 2: 20, 3: 10}, with_distribution=True)
    a = draw_sample(pop, strategy="active", n=40, seed=5)
    b = draw_sample(pop, strategy="active", n=40, seed=5)
    assert [(p.query_id, p.doc_id) for p in a.pairs] == [(p.query_id, p.doc_id) for p in b.pairs]
    assert len({(p.query_id, p.doc_id) for p in a.pairs}) == 40


def test_the_prediction_is_p_relevant_where_a_distribution_is_known(tmp_path: Path) -> None:
    import pandas as pd

    from calibration.join import relevance_prediction
    from grader.io.grades import read_llm_grades
    from grader.io.python_inputs import llm_grades_table

    pop = population({1: 2, 2: 2}, with_distribution=True)
    pop[0] = pop[0].model_copy(update={"distribution": None})  # one judgment without logprobs
    path = tmp_path / "j.jsonl"
    write_judgments(path, pop)
    frame = read_llm_grades(path)
    assert frame["p_grade_2"].isna().tolist() == [True, False, False, False]
    pred = relevance_prediction(frame["grade"], frame, 2)
    assert pred[0] == 0.0  # its grade, 1: not relevant
    assert pred[1:] == pytest.approx([sum(j.distribution[2:]) for j in pop[1:]])  # type: ignore[index]
    rows = [j.model_dump(include={"query_id", "doc_id", "grade", "distribution"}) for j in pop]
    table = llm_grades_table(pd.DataFrame(rows))  # the Python API's frames: the same columns
    assert relevance_prediction(table["grade"], table, 2) == pytest.approx(pred)
