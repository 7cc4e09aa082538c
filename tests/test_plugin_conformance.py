"""The conformance suites, over everything registered: each measure's list function equals its
vectorised function, its cutoff is honoured and its names print back; each judge kind's
fingerprint is stable across two builds and its answers come under the key asked. The checks are
`relgrade.testing`'s, what a plug-in author runs on their package; here they run on the built-in
measures and judges and on the toy plug-ins of tests/plugins/, and catch a toy measure that
ignores its cutoff and a toy judge that answers under another key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import relgrade as rg
import tests.plugins.toy_judge  # noqa: F401  (registers toylen: checked with the built-in ones)
from grader.cli.main import main
from grader.errors import JudgeError
from grader.judges import registry as judges
from grader.judges.base import Judge
from grader.metrics import judged_at_k
from grader.metrics import registry as measures
from grader.models import CallRecord
from grader.prompts import PromptSpec, load_prompt
from relgrade.testing import check_judge, check_measure
from tests.fakeserver import FakeServer
from tests.helpers.llm_judges import make_judge
from tests.plugins.toy_judge import LengthJudge
from tests.plugins.toy_measure import compute as toy_rbp
from tests.plugins.toy_measure import rbp

MEASURES = [d.name for d in measures.registered()]
JUDGES = judges.judge_names()


@pytest.mark.parametrize("name", MEASURES)
def test_every_registered_measure_conforms(name: str) -> None:
    check_measure(name)


def test_a_measure_is_checked_with_the_parameters_given() -> None:
    check_measure("toyrbp", params={"p": "0.5"}, seed=1, queries=50)
    check_measure("Judged", params={"of": "returned"}, seed=2, queries=50)
    assert judged_at_k([3, None], 10, of="returned") == 0.5  # of min(10, 2) returned
    assert judged_at_k([3, None], 10) == 0.1  # of k


def test_the_suites_cover_the_builtin_and_toy_plugins() -> None:
    assert {"nDCG", "RR", "P", "AP", "Judged", "ToyRBP"} <= set(MEASURES)
    assert {"llm", "lexical", "toylen"} <= set(JUDGES)


class FakeEndpoint:
    """The fake server as a command's LLM endpoint (`grader.judges.registry.Endpoint`)."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server

    def model(self, flag: str | None = None) -> str:
        return flag or "fake-model"

    def llm_judge(
        self,
        model: str,
        prompt: PromptSpec | str,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> Judge:
        return make_judge(self.server, model=model, prompt=prompt)


@pytest.mark.parametrize("kind", JUDGES)
def test_every_registered_judge_conforms(kind: str, fake_server: FakeServer) -> None:
    endpoint = FakeEndpoint(fake_server)
    settings = judges.JudgeSettings(prompt=load_prompt("passage-v1"), endpoint=endpoint)
    if judges.judge_kind(kind).needs_all_docs:
        settings = judges.JudgeSettings(docs={"d": rg.Doc(doc_id="d", text="cache eviction")})
    check_judge(kind, settings)


# A measure that ignores its cutoff, and a judge that answers under another key, registered for
# one test only (the registries are restored after it).


@pytest.fixture
def scratch_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("_BY_NAME", "_SPELLINGS", "_TREC_EVAL"):
        monkeypatch.setattr(measures, name, dict(getattr(measures, name)))
    monkeypatch.setattr(judges, "_KINDS", dict(judges._KINDS))


def rbp_ignoring_k(
    rels: list[int | None], p: float = 0.8, k: int | None = None, threshold: int = 2
) -> float:
    return rbp(rels, p=p, threshold=threshold)  # k is dropped


def compute_ignoring_k(measure: rg.Measure, ranked: rg.Ranked) -> npt.NDArray[np.float64]:
    sel = ranked.grade >= measure.threshold
    weights = np.asarray(0.2 * np.power(0.8, ranked.rank - 1.0), dtype=np.float64)
    return ranked.per_query(sel, weights)


@pytest.mark.usefixtures("scratch_registries")
def test_a_measure_that_ignores_its_cutoff_is_caught() -> None:
    rg.register_measure(
        "NoCutRBP", compute_ignoring_k, usage="NoCutRBP", help="?", list_function=rbp_ignoring_k
    )
    with pytest.raises(AssertionError, match=r"NoCutRBP\(rel=1\)@1 on q\d+: .*not honoured"):
        check_measure("NoCutRBP")


@pytest.mark.usefixtures("scratch_registries")
def test_a_list_function_that_differs_from_its_kernel_is_caught() -> None:
    def rbp_half(rels: list[int | None], k: int | None = None, threshold: int = 2) -> float:
        return rbp(rels, p=0.5, k=k, threshold=threshold)

    parse = {"p": float}
    rg.register_measure(
        "HalfRBP",
        toy_rbp,
        usage="HalfRBP",
        help="?",
        params=parse,
        defaults={"p": 0.8},
        list_function=rbp_half,
    )
    with pytest.raises(AssertionError, match=r"the list function gives .* the vectorised"):
        check_measure("HalfRBP")


class OtherKeyJudge(LengthJudge):
    """The toy judge, answering under a key of its own making."""

    @property
    def judge_id(self) -> str:
        return "otherkey"

    async def judge(self, query: rg.Query, doc: rg.Doc, *, key: str) -> rg.Judgment:
        judgment = await super().judge(query, doc, key=key)
        return judgment.model_copy(update={"key": f"mine:{query.query_id}:{doc.doc_id}"})


def make_other_key_judge(settings: rg.JudgeSettings) -> rg.Judge:
    return OtherKeyJudge()


@pytest.mark.usefixtures("scratch_registries")
def test_a_judge_answering_under_another_key_is_caught() -> None:
    rg.register_judge("otherkey", make_other_key_judge, help="broken")
    with pytest.raises(AssertionError, match=r"judge 'otherkey'.*answered under the key 'mine:"):
        check_judge("otherkey")


@pytest.mark.usefixtures("scratch_registries")
def test_the_pipeline_stops_a_judge_answering_under_another_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, every rerun graded every pair again, exit 0, no word; now the first answer stops
    the run with a JudgeError naming the judge, on the command line and in the Python API."""
    rg.register_judge("otherkey", make_other_key_judge, help="broken")
    (tmp_path / "q.tsv").write_text("q1\tcache\n")
    (tmp_path / "d.jsonl").write_text(json.dumps({"doc_id": "d1", "text": "x" * 25}) + "\n")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 1.0 r\n")
    files = ["--queries", str(tmp_path / "q.tsv"), "--docs", str(tmp_path / "d.jsonl")]
    store = str(tmp_path / "s.db")
    argv = ["grade", *files, "--run", str(tmp_path / "run.txt"), "--judge", "otherkey"]
    code = main([*argv, "--store", store, "--quiet"])
    err = capsys.readouterr().err
    assert code == JudgeError.exit_code, err
    assert "judge 'otherkey'" in err and "answered under the key 'mine:q1:d1'" in err
    queries, docs, run = (str(tmp_path / name) for name in ("q.tsv", "d.jsonl", "run.txt"))
    with pytest.raises(JudgeError, match=r"judge 'otherkey' \(tests\.test_plugin_conformance"):
        rg.grade(runs=run, queries=queries, docs=docs, judge="otherkey", store=store)


def test_ok_and_failed_fill_in_the_common_fields() -> None:
    judge, query, doc = LengthJudge(), rg.Query(query_id="q", text="t"), rg.Doc(doc_id="d", text="")
    good = rg.ok_judgment(judge, query, doc, key="k1", grade=2, reason="r")
    bad = rg.failed_judgment(judge, query, doc, key="k2", error=ValueError("no text"))
    assert (good.query_id, good.doc_id, good.judge, good.key) == ("q", "d", "toylen", "k1")
    assert (good.status, good.grade, good.reason) == ("ok", 2, "r")
    assert (bad.status, bad.grade, bad.key, bad.judge) == ("failed", None, "k2", "toylen")
    assert bad.error is not None and (bad.error.type, bad.error.message) == (
        "ValueError",
        "no text",
    )


@pytest.mark.usefixtures("scratch_registries")
def test_params_and_defaults_may_be_none_and_are_copied() -> None:
    parse: dict[str, Any] = {"p": float}
    rg.register_measure("NoneRBP", toy_rbp, usage="NoneRBP", help="?", params=None, defaults=None)
    copied = rg.register_measure(
        "CopyRBP", toy_rbp, usage="CopyRBP", help="?", params=parse, defaults={"p": 0.8}
    )
    parse["q"] = float  # the caller's dict changed after registering: the measure is not
    assert dict(copied.params) == {"p": float}
