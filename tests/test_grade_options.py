"""grade's options are one set: every flag of `relgrade grade` is a field of `GradeOptions` with
the same default and a keyword of `relgrade.grade`, and every keyword of `relgrade.grade` is a
flag (but the API's own: `pairs`, `runs` for --run, `progress` for --quiet)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import build_parser
from grader.io.judgments import read_judgments
from grader.job.options import OPTION_NAMES, GradeOptions, options_from
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

API_ONLY = {"pairs": None, "runs": "run", "progress": "quiet", "options": None}
"""The API's keywords that are no flag, with the option each stands for."""

PAIRS = pd.DataFrame(
    {"query_id": ["q1"], "doc_id": ["d1"], "query": ["sort a list"], "text": ["sort a list"]}
)


def _grade_flags() -> dict[str, object]:
    args = build_parser("grade").parse_args(["grade", "--run", "r.txt"])
    return {k: v for k, v in vars(args).items() if k not in ("command", "func")}


def test_every_flag_is_an_option_with_the_same_default() -> None:
    flags = _grade_flags()
    assert set(flags) == OPTION_NAMES
    defaults = GradeOptions()
    for name, value in flags.items():
        assert name == "run" or value == getattr(defaults, name), name


def test_every_api_keyword_is_a_flag_and_every_flag_a_keyword(tmp_path: Path) -> None:
    named = set(inspect.signature(rg.grade).parameters)
    assert named == set(inspect.signature(rg.agrade).parameters)
    stands_for = {API_ONLY.get(k, k) for k in named} - {None}
    assert stands_for <= OPTION_NAMES
    # The other options go by name through **options: all of them, at their defaults.
    rest = {
        f.name: getattr(GradeOptions(), f.name)
        for f in dataclasses.fields(GradeOptions)
        if f.name not in stands_for
    }
    assert "logprobs" in rest and "out" in rest and "merged_out" in rest
    store = tmp_path / "s.db"
    frame = rg.grade(PAIRS, judge="lexical", store=store, progress=False, **rest)
    assert frame.status.tolist() == ["ok"]


def test_a_keyword_that_is_no_option_is_a_type_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'no_such_option'"):
        rg.grade(PAIRS, judge="lexical", store=tmp_path / "s.db", no_such_option=1)
    with pytest.raises(TypeError, match="'no_logprobs'"):
        options_from({"no_logprobs": True})  # the flag is --no-logprobs, the option logprobs


def test_logprobs_off_and_out_work_from_the_api(fake_server: FakeServer, tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=1, depth=3)
    frame = rg.grade(
        runs=files.run,
        queries=files.queries,
        docs=files.docs,
        model="fake-model",
        base_url=fake_server.base_url,
        store=tmp_path / "s.db",
        progress=False,
        logprobs=False,
        out=str(tmp_path / "j.jsonl"),
        qrels_out=str(tmp_path / "q.qrels"),
    )
    assert (frame.status == "ok").all() and len(fake_server.requests) == files.n_pairs
    assert not any(body.get("logprobs") for body in fake_server.requests)
    written = read_judgments(tmp_path / "j.jsonl")
    assert [(j.query_id, j.doc_id, j.grade) for j in written] == list(
        frame[["query_id", "doc_id", "grade"]].itertuples(index=False, name=None)
    )
    qrels = (tmp_path / "q.qrels").read_text().splitlines()
    assert qrels == [f"{j.query_id} 0 {j.doc_id} {j.grade}" for j in written]
