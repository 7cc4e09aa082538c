"""`evaluate --fill`'s interval: its width on hand-checkable cases, no interval (and the reason)
where the pairs graded by both do not reach the holes or nobody graded part of the top k, the
design that works for a new system's holes (people grade a random sample of the holes), and
the corrected difference between two runs, estimated jointly."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError, RelgradeWarning
from grader.evaluation.fill.interval import Interval, combine, corrected_differences, p_value
from grader.evaluation.fill.scores import evaluate_fill
from grader.io.trec import read_qrels, read_run
from grader.metrics.evaluate import evaluate
from grader.metrics.measures import parse_measure
from tests.helpers.fill_top import top_world, write_qrels, write_run
from tests.helpers.fill_world import fill_world


def test_each_pairs_effect_is_averaged_over_the_imputations_first() -> None:
    # Two imputations, two pairs: d = (0.1, 0.3) then (0.3, 0.1). Averaged, both pairs have
    # d-bar 0.2: the pairs do not differ, the imputation noise cancels. The estimates are
    # 0.40 + 4 x 0.2 = 1.2 and 0.50 + 4 x 0.2 = 1.3: mean 1.25, B = 0.005, variance B/m.
    # (Rubin's rules would add each imputation's 4^2 x 0.02 / 2 + 4 x 0.02 = 0.24 besides.)
    means = np.array([[0.40], [0.50]])
    effects = np.array([[[0.1], [0.3]], [[0.3], [0.1]]])
    estimate, variance = combine(means, effects, np.ones(2), holes=4)
    assert estimate == pytest.approx([1.25])
    assert variance == pytest.approx([0.005 / 2])
    # A measure corrected to first order only (AP, RR) keeps Rubin's rules and their slack:
    # each imputation's variance (d = (0.1, 0.3): 0.02 with n - 1 = 1) plus (1 + 1/2) B.
    _, rubin = combine(means, effects, np.ones(2), holes=4, first_order=np.array([True]))
    assert rubin == pytest.approx([4**2 * 0.02 / 2 + 4 * 0.02 + 1.5 * 0.005])


def test_the_variance_of_weighted_pair_effects_on_one_imputation() -> None:
    # One imputation, d = (0, 0.1, 0.5) with 1/pi = (1, 1, 2): w = (1/4, 1/4, 1/2), the mean
    # 0.275; the weighted variance 1/4 0.275^2 + 1/4 0.175^2 + 1/2 0.225^2 = 0.051875, x n/(n-1)
    # = 0.0778125; n_eff = 4^2 / 6. H = 2 holes: 2^2 x 0.0778125 / (8/3) + 2 x 0.0778125.
    estimate, variance = combine(
        np.array([[0.3]]), np.array([[[0.0], [0.1], [0.5]]]), np.array([1.0, 1.0, 2.0]), holes=2
    )
    assert estimate == pytest.approx([0.3 + 2 * 0.275])
    assert variance == pytest.approx([4 * 0.0778125 * 3 / 8 + 2 * 0.0778125])


def _pairs(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(frame["query_id"], frame["doc_id"], strict=True))


def _files(tmp_path: Path, world: object) -> tuple[Path, Path, list[Path]]:
    human, llm = tmp_path / "human.qrels", tmp_path / "llm.qrels"
    write_qrels(human, world.human)  # type: ignore[attr-defined]
    write_qrels(llm, world.llm)  # type: ignore[attr-defined]
    runs = []
    for name, frame in world.runs.items():  # type: ignore[attr-defined]
        runs.append(tmp_path / f"{name}.txt")
        write_run(runs[-1], frame, name)
    return human, llm, runs


def test_top_ranked_holes_print_no_interval_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = top_world(seed=1)
    human, llm, runs = _files(tmp_path, world)
    argv = ["evaluate", str(human), *map(str, runs), "--fill", str(llm)]
    argv += ["-m", "nDCG@5", "P(rel=2)@5"]
    assert main([*argv, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    filled = [r for r in json.loads(out) if r["regime"] == "filled" and "source" not in r]
    assert len(filled) == 4
    for record in filled:
        assert record["ci_low"] is None and record["ci_high"] is None
        assert record["corrected"] is None
        assert "does not reach where the holes are" in record["reason"]
        assert "relgrade sample" in record["reason"]
    for run in ("r0", "r1"):
        assert f"warning: no interval for {run} (nDCG@5, P(rel=2)@5): only 0 pair(s)" in err
    assert main(argv) == 0  # the table: no interval, the same reasons
    out, err = capsys.readouterr()
    assert "does not reach where the holes are" in err
    assert "[" not in out.split("who graded")[0].split("interval]")[1]
    assert main([*argv, "--format", "csv"]) == 0  # csv: a reason column, the interval empty
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out))
    refused = rows[rows["reason"].notna()]
    assert len(refused) == 4 and refused["ci_low"].isna().all()
    assert (refused["regime"] == "filled").all()


def test_the_api_says_why_as_a_warning(tmp_path: Path) -> None:
    world = top_world(seed=1)
    with pytest.warns(RelgradeWarning, match="no interval for r[01] .*does not reach"):
        frame = rg.evaluate(world.human, world.runs, ["nDCG@5"], fill=world.llm)
    filled = frame[(frame["regime"] == "filled") & frame["source"].isna()]
    assert filled["reason"].str.contains("does not reach").all()
    assert filled["ci_low"].isna().all()


def test_a_top_k_nobody_graded_in_part_gets_no_interval() -> None:
    # People judged down to rank 14 of r0: r0's ranks 15-20 nobody graded. AP looks at them.
    world = top_world(seed=2, judged_to=14)
    pairs = {(q, d): 1.0 for q, d in _pairs(world.holes)}
    human = pd.concat([world.human, world.holes], ignore_index=True)  # the holes design
    result = evaluate_fill(
        human, world.llm, {"r0": world.runs["r0"]}, ["nDCG@5", "AP(rel=2)"],
        weights=pairs, design="holes",
    )  # fmt: skip
    assert "nDCG@5" in result.intervals["r0"]
    assert "AP(rel=2)" not in result.intervals["r0"]
    assert "of r0's ranking nobody graded" in result.refused["r0"]["AP(rel=2)"]


def _sample(tmp_path: Path, llm: Path, human: Path, n: int) -> Path:
    """`relgrade sample` of n LLM-graded holes (uniform); returns the manifest's path."""
    world_docs = tmp_path / "docs.jsonl"
    queries = tmp_path / "queries.tsv"
    qrels = pd.read_csv(llm, sep=" ", header=None, names=["q", "z", "d", "g"], dtype=str)
    queries.write_text("".join(f"{q}\tquery {q}\n" for q in qrels["q"].unique()))
    world_docs.write_text(
        "".join(json.dumps({"docid": d, "doc": f"text of {d}"}) + "\n" for d in qrels["d"])
    )
    argv = ["sample", "--judgments", str(llm), "--n", str(n), "--strategy", "uniform"]
    argv += ["--exclude", str(human), "--queries", str(queries), "--docs", str(world_docs)]
    assert main([*argv, "--seed", "3", "--out", str(tmp_path / "sample.csv")]) == 0
    return tmp_path / "sample.manifest.json"


def test_a_graded_sample_of_the_holes_gives_the_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An LLM that always agrees with people: the corrected score is the full-qrels score.
    world = top_world(seed=4, right=1.0, also=0)
    human, llm, runs = _files(tmp_path, world)
    manifest = _sample(tmp_path, llm, human, n=20)
    drawn = {(p["query_id"], p["doc_id"]) for p in json.loads(manifest.read_text())["pairs"]}
    graded = world.holes[[k in drawn for k in _pairs(world.holes)]]
    assert len(graded) == 20
    people = tmp_path / "people.qrels"  # people's qrels and their grades of the sample
    write_qrels(people, pd.concat([world.human, graded]))
    capsys.readouterr()
    argv = ["evaluate", str(people), *map(str, runs), "--fill", str(llm), "--format", "json"]
    assert main([*argv, "--fill-manifest", str(manifest), "-m", "nDCG@5", "P(rel=2)@5"]) == 0
    out, err = capsys.readouterr()
    assert "a sample of the holes people graded" in err
    assert "no interval" not in err
    for record in json.loads(out):
        if record["regime"] == "filled" and "source" not in record:
            full = evaluate(world.truth, world.runs[record["run"]], [record["measure"]])
            assert record["corrected"] == pytest.approx(full["value"].mean(), abs=1e-12)
            assert record["ci_high"] - record["ci_low"] == pytest.approx(0.0, abs=1e-12)


def _covers(seed: int, n: int) -> tuple[list[bool], list[bool]]:
    """Whether each run's interval, and r1's difference from r0, cover the all-human value."""
    world = top_world(seed, queries=30, docs=40, top=8, also=0, right=0.6)
    rng = np.random.default_rng(seed)
    drawn = world.holes.iloc[rng.choice(len(world.holes), size=n, replace=False)]
    weights = dict.fromkeys(_pairs(drawn), len(world.holes) / n)
    human = pd.concat([world.human, drawn], ignore_index=True)
    measures = ["nDCG@10", "P(rel=2)@10"]
    result = evaluate_fill(
        human, world.llm, world.runs, measures, weights=weights, design="holes", seed=seed,
        baseline="r0",
    )  # fmt: skip
    full = {
        run: evaluate(world.truth, frame, measures).groupby("measure")["value"].mean()
        for run, frame in world.runs.items()
    }
    scores, differences = [], []
    for measure in measures:
        for run in world.runs:
            iv = result.intervals[run][measure]
            scores.append(iv.low <= full[run][measure] <= iv.high)
        diff = result.differences["r1"][measure]
        differences.append(diff.low <= full["r1"][measure] - full["r0"][measure] <= diff.high)
    return scores, differences


@pytest.mark.slow
def test_a_sample_of_the_holes_covers_in_simulation() -> None:
    # 40 seeded worlds, holes the two runs' top 8 (about 360), people grading 80 of them, an
    # LLM right 60% of the time. 160 intervals of a run's score (2 runs x 2 measures): at 95%
    # nominal, fewer than 144 covering (90%) has probability below 1%; 80 of the difference
    # r1 - r0 (estimated jointly): fewer than 70 (87.5%), below 1%.
    found = [_covers(seed, 80) for seed in range(40)]
    scores = [c for s, _ in found for c in s]
    differences = [c for _, d in found for c in d]
    assert sum(scores) >= 144, sum(scores)
    assert sum(differences) >= 70, sum(differences)


def test_the_difference_is_estimated_jointly(tmp_path: Path) -> None:
    world = fill_world(tmp_path)
    human = read_qrels(world["paths"]["human"])
    llm = read_qrels(world["paths"]["llm"])
    runs = {p.stem: read_run(p) for p in world["runs"]}
    result = evaluate_fill(human, llm, runs, ["nDCG@5"], baseline="run0", check=False)
    one, other = result.intervals["run1"]["nDCG@5"], result.intervals["run0"]["nDCG@5"]
    diff = result.differences["run1"]["nDCG@5"]
    assert 0 < one.estimate < 1 and 0 < other.estimate < 1  # not held to 0..1
    assert diff.estimate == pytest.approx(one.estimate - other.estimate, abs=1e-12)
    assert diff.high - diff.estimate == pytest.approx(diff.estimate - diff.low)
    assert list(result.differences) == ["run1"]
    with pytest.raises(InputError, match="the baseline 'run9' is none of the runs"):
        evaluate_fill(human, llm, runs, ["nDCG@5"], baseline="run9")


def test_what_two_runs_share_cancels_in_their_difference() -> None:
    # Two runs with the same means and effects on every imputation: the difference is 0 with
    # no width, whatever the noise each carries. A run whose effects are those of the baseline
    # plus (0.1, -0.1) on 2 pairs, means +0.2: the difference is combine() on the differences:
    # 0.2 + 2 x 0 and variance 2^2 x 0.02 / 2 + 2 x 0.02 (var of (0.1, -0.1) with n - 1 = 1).
    means = np.array([[0.4], [0.7]])
    effects = np.array([[[0.3], [-0.2]], [[0.0], [0.5]]])
    shift = np.array([[[0.1], [-0.1]], [[0.1], [-0.1]]])
    found = {"base": (means, effects), "same": (means, effects)}
    found["up"] = (means + 0.2, effects + shift)
    measure = parse_measure("P(rel=1)@5")  # linear: averaged effects, B/m
    out = corrected_differences(found, "base", [measure], np.ones(2), holes=2)
    same, up = out["same"][str(measure)], out["up"][str(measure)]
    assert same.estimate == pytest.approx(0.0)
    assert same.high - same.low == pytest.approx(0.0)
    assert up.estimate == pytest.approx(0.2)
    z = NormalDist().inv_cdf(0.975)
    assert up.high - up.estimate == pytest.approx(z * (4 * 0.02 / 2 + 2 * 0.02) ** 0.5)


def test_pairs_from_the_judged_pool_are_refused_in_simulation() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(3):
            world = top_world(seed, queries=30, docs=40, top=8, also=5)
            result = evaluate_fill(world.human, world.llm, world.runs, ["nDCG@10"], seed=seed)
            assert set(result.refused) == {"r0", "r1"}
            assert result.intervals == {"r0": {}, "r1": {}}


def test_the_p_value_of_a_difference_is_the_z_test_its_interval_inverts() -> None:
    from scipy.stats import norm

    diff = Interval(0.05, 0.05 - 1.96 * 0.02, 0.05 + 1.96 * 0.02, 0.95, 10)
    assert p_value(diff) == pytest.approx(2 * norm.sf(0.05 / (1.96 * 0.02 / norm.ppf(0.975))))
    edge = Interval(0.03, 0.0, 0.06, 0.95, 10)  # the interval touches 0: p = 0.05
    assert p_value(edge) == pytest.approx(0.05)
