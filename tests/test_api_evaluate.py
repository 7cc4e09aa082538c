"""`relgrade.evaluate` equals `relgrade evaluate --format json` for every input form, on TREC DL
2019 (per query and mean, every default measure), and binary qrels warn and use rel=1 at every
importable entry point (never a silent 0)."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError, RelgradeWarning
from grader.io.trec import read_qrels
from grader.metrics import evaluate as metrics_evaluate
from tests.helpers.params import quick_first
from tests.helpers.trec import write_run


def _dl2019() -> Path | None:
    """The shared TREC DL 2019 folder, looked up from this file's ancestors."""
    for parent in Path(__file__).resolve().parents:
        found = parent / "shared" / "data" / "trec-dl-2019"
        if (found / "2019qrels-pass.txt").exists():
            return found
    return None


DL2019 = _dl2019()
QRELS = DL2019 / "2019qrels-pass.txt" if DL2019 is not None else Path("absent")
needs_dl2019 = pytest.mark.skipif(DL2019 is None, reason="TREC DL 2019 absent")

Nested = dict[str, dict[str, Any]]


def _synth_runs(qrels: pd.DataFrame) -> dict[str, Nested]:
    """Two runs over the judged pool (rounded scores make ties; some queries left out)."""
    judged: Nested = {}
    for qid, did, grade in qrels[["query_id", "doc_id", "grade"]].itertuples(index=False):
        judged.setdefault(qid, {})[did] = int(grade)
    rng = np.random.default_rng(2019)
    runs: dict[str, Nested] = {}
    for name, skip in (("alpha", 10), ("beta", 7)):
        run: Nested = {}
        for i, (qid, docs) in enumerate(judged.items()):
            if i % skip == 0:
                continue
            picked = list(rng.choice(list(docs), size=min(len(docs), 60), replace=False))
            picked += [f"unjudged{j}" for j in range(20)]
            scores = np.round(rng.normal(size=len(picked)), 2)
            run[qid] = {str(d): float(s) for d, s in zip(picked, scores, strict=True)}
        runs[name] = run
    return runs


def _long(run: Nested, qid: str = "query_id", did: str = "doc_id") -> pd.DataFrame:
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    return pd.DataFrame(rows, columns=[qid, did, "score"])


def _command(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str]:
    capsys.readouterr()
    assert main(["evaluate", *args, "--format", "json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def _same(frame: pd.DataFrame, records: list[dict[str, Any]], form: str = "") -> None:
    expected = pd.DataFrame(records)
    expected["value"] = expected["value"].astype("float64")
    assert len(frame) == len(expected) > 0, form
    pd.testing.assert_frame_equal(
        frame.reset_index(drop=True), expected, check_exact=True, obj=f"rg.evaluate of {form}"
    )


@pytest.fixture(scope="module")
def dl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    assert DL2019 is not None
    folder = tmp_path_factory.mktemp("dl")
    qrels = read_qrels(QRELS)
    runs = _synth_runs(qrels)
    paths = {}
    for name, run in runs.items():
        frame = _long(run)
        frame["rank"] = frame.groupby("query_id").cumcount() + 1
        paths[name] = folder / f"{name}.run"
        write_run(paths[name], frame, name)
        (folder / f"{name}.run.gz").write_bytes(gzip.compress(paths[name].read_bytes()))
    gz = folder / "qrels.txt.gz"
    gz.write_bytes(gzip.compress(QRELS.read_bytes()))
    return {"qrels": qrels, "runs": runs, "paths": paths, "gz": gz}


def _qrels_forms(dl: dict[str, Any]) -> dict[str, Any]:
    import ir_measures
    from ir_datasets.formats import TrecQrel

    q = dl["qrels"]
    nested: Nested = {}
    for qid, did, grade in q.itertuples(index=False):
        nested.setdefault(qid, {})[did] = int(grade)
    rows = list(q.itertuples(index=False))
    return {
        "path": str(QRELS),
        "gz path": dl["gz"],
        "frame relevance": q.rename(columns={"grade": "relevance"}),
        "frame grade": q,
        "pyterrier frame": q.rename(
            columns={"query_id": "qid", "doc_id": "docno", "grade": "label"}
        ),
        "pytrec_eval dict": nested,
        "ir_measures Qrels": [ir_measures.Qrel(a, b, int(c)) for a, b, c in rows],
        "ir_datasets TrecQrels": [TrecQrel(a, b, int(c), "0") for a, b, c in rows],
    }


def _run_forms(dl: dict[str, Any]) -> dict[str, Any]:
    import ir_measures
    from ir_datasets.formats import GenericScoredDoc

    runs: dict[str, Nested] = dl["runs"]
    pyterrier = {}
    for name, run in runs.items():
        frame = _long(run, "qid", "docno")
        frame["rank"] = 0  # PyTerrier's rank is never trusted: ranked by score here
        frame["query"] = "text"
        pyterrier[name] = frame
    return {
        "paths": {n: str(p) for n, p in dl["paths"].items()},
        "frames": {n: _long(r) for n, r in runs.items()},
        "pyterrier frames": pyterrier,
        "pytrec_eval dicts": runs,
        "gz paths": {n: str(p) + ".gz" for n, p in dl["paths"].items()},
        "ir_datasets GenericScoredDocs": {
            n: [GenericScoredDoc(q, d, s) for q, docs in r.items() for d, s in docs.items()]
            for n, r in runs.items()
        },
        "ir_measures ScoredDocs": {
            n: [ir_measures.ScoredDoc(q, d, s) for q, docs in r.items() for d, s in docs.items()]
            for n, r in runs.items()
        },
    }


@pytest.mark.slow
@needs_dl2019
@pytest.mark.parametrize("per_query", quick_first([False, True]))
def test_every_input_form_equals_the_command_on_dl2019(
    dl: dict[str, Any], per_query: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [str(p) for p in dl["paths"].values()]
    args = [str(QRELS), *paths] + (["--per-query"] if per_query else [])
    records, _ = _command(args, capsys)
    assert {r["measure"] for r in records} >= {"nDCG@10", "RR(rel=2)@10", "AP(rel=2)"}
    for form, qrels in _qrels_forms(dl).items():
        frame = rg.evaluate(qrels, paths, per_query=per_query)
        _same(frame, records, f"qrels as {form}")
    for form, runs in _run_forms(dl).items():
        frame = rg.evaluate(str(QRELS), runs, per_query=per_query)
        _same(frame, records, f"runs as {form}")


@needs_dl2019
def test_binary_qrels_warn_and_use_rel_1_as_the_command(
    dl: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = dl["qrels"].assign(grade=(dl["qrels"]["grade"] >= 2).astype(int))
    path = tmp_path / "binary.qrels"
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in binary.itertuples(index=False)))
    run = str(dl["paths"]["alpha"])
    records, err = _command([str(path), run], capsys)
    with pytest.warns(RelgradeWarning) as caught:
        frame = rg.evaluate(binary, dl["runs"]["alpha"])
    frame["run"] = "alpha"
    _same(frame, records)
    said = [str(w.message).replace("run run:", "run alpha:") for w in caught]
    assert said and all(line in err for line in said)
    assert "use rel=1, e.g. RR(rel=1)@10" in said[0]
    # the numbers are pytrec_eval's at relevance level 1, not 0
    nested: Nested = {}
    for q, d, g in binary.itertuples(index=False):
        nested.setdefault(q, {})[d] = int(g)
    ours = rg.evaluate(nested, dl["runs"]["alpha"], ["P(rel=1)@10"], per_query=True)
    ref = pytrec_eval.RelevanceEvaluator(nested, {"P_10"}, relevance_level=1).evaluate(
        dl["runs"]["alpha"]
    )
    per_query = ours[ours.query_id != "all"].set_index("query_id")["value"]
    for qid, values in ref.items():
        assert per_query[qid] == pytest.approx(values["P_10"], abs=1e-9)


def test_library_evaluate_infers_rel_1_on_binary_qrels() -> None:
    qrels = pd.DataFrame({"query_id": ["q"] * 3, "doc_id": ["a", "b", "c"], "grade": [1, 0, 1]})
    run = pd.DataFrame({"query_id": ["q"] * 3, "doc_id": ["a", "b", "c"], "score": [3, 2, 1]})
    with pytest.warns(RelgradeWarning, match=r"binary qrels \(highest grade 1\)"):
        frame = metrics_evaluate(qrels, run, ["P@2"])
    assert frame.measure.tolist() == ["P(rel=1)@2"] and frame.value.tolist() == [0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # graded qrels: nothing to say, rel=2 as before
        graded = metrics_evaluate(qrels.assign(grade=[3, 0, 2]), run, ["P@2"])
    assert graded.measure.tolist() == ["P(rel=2)@2"] and graded.value.tolist() == [0.5]


def test_ir_measures_objects_and_strings_name_the_same_measures() -> None:
    import ir_measures

    qrels = {"q1": {"a": 2, "b": 0, "c": 3}}
    run = {"q1": {"a": 0.3, "b": 0.9, "c": 0.1}}
    objects = rg.evaluate(qrels, run, [ir_measures.nDCG @ 10, ir_measures.P(rel=2) @ 2])
    strings = rg.evaluate(qrels, run, ["nDCG@10", "P(rel=2)@2"])
    columns = ["run", "query_id", "measure", "value"]
    pd.testing.assert_frame_equal(objects[columns], strings[columns])
    assert strings.measure.tolist() == ["nDCG@10", "P(rel=2)@2"]
    assert objects.requested.tolist() == ["nDCG@10", "P(rel=2)@2"]


def test_wrong_columns_name_what_was_found_and_expected() -> None:
    bad = pd.DataFrame({"topic": ["q"], "doc": ["a"], "rel": [1]})
    with pytest.raises(InputError) as caught:
        rg.evaluate(bad, {"q": {"a": 1.0}})
    text = str(caught.value)
    assert "columns topic, doc, rel" in text and "qid, docno, label" in text
    with pytest.raises(InputError, match=r"run has columns qid, docid: it lacks score"):
        rg.evaluate({"q": {"a": 1}}, pd.DataFrame({"qid": ["q"], "docid": ["a"]}))


def test_errors_carry_the_commands_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("q 0 a 1\n")
    run.write_text("q Q0 a 1 1.0 t\n")
    assert main(["evaluate", str(qrels), str(run), "-m", "nDCG@x"]) == 2
    err = capsys.readouterr().err
    with pytest.raises(InputError) as caught:
        rg.evaluate(qrels, run, ["nDCG@x"])
    assert str(caught.value) in err


def test_a_run_answering_no_query_warns(tmp_path: Path) -> None:
    with pytest.warns(RelgradeWarning, match="answers none of the 1 qrels queries"):
        frame = rg.evaluate({"q1": {"a": 2}}, {"other": {"a": 1.0}}, ["nDCG@10"])
    assert frame.value.tolist() == [0.0]


def test_a_run_frame_ranking_a_doc_twice_is_an_error() -> None:
    run = pd.DataFrame({"qid": ["q", "q", "q"], "docno": ["a", "b", "a"], "score": [3, 2, 1]})
    with pytest.raises(InputError, match=r"ranks doc 'a' twice for query 'q' \(rows 0 and 2\)"):
        rg.evaluate({"q": {"a": 1}}, run)
