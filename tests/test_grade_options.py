"""grade's options are one set: every flag of `relgrade grade` is a field of `GradeOptions` with
the same default and a keyword of `relgrade.grade`, and every keyword of `relgrade.grade` is a
flag (but the API's own: `pairs`, `runs` for --run, `progress` for --quiet)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

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


def test_the_api_grades_on_top_of_people_as_the_command(tmp_path: Path) -> None:
    """One job: the same options through the command and the API write the same files."""
    from grader.cli.main import main
    from tests.test_holes import HUMAN

    files = write_grade_files(tmp_path, n_queries=4, depth=6)
    human = tmp_path / "human.qrels"
    human.write_text(HUMAN)
    written: dict[str, list[str]] = {}
    for how in ("cli", "api"):
        folder = tmp_path / how
        folder.mkdir()
        options: dict[str, Any] = {
            "judge": "lexical",
            "store": str(folder / "s.db"),
            "skip_judged": str(human),
            "out": str(folder / "j.jsonl"),
            "merged_out": str(folder / "merged.qrels"),
            "also_judged": 4,
            "seed": 3,
        }
        if how == "cli":
            flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
            assert main([*files.args(*flags), "--quiet"]) == 0
        else:
            frame = rg.grade(
                runs=files.run, queries=files.queries, docs=files.docs, progress=False, **options
            )
            assert any("holes 12" in note for note in frame.attrs["notes"])
        names = ("j.jsonl", "merged.qrels", "j.manifest.json")
        written[how] = [(folder / name).read_text().replace(str(folder), "") for name in names]
    cli, api = written["cli"], written["api"]
    assert cli[1] == api[1] and cli[1]  # --merged-out
    strip = [_without_times(text) for text in (cli[0], api[0])]
    assert strip[0] == strip[1]  # --out, with `source` per line
    assert json.loads(cli[2])["pairs"] == json.loads(api[2])["pairs"]  # the also-judged draw


def _without_times(jsonl: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in jsonl.splitlines()]
    return [
        {k: v for k, v in line.items() if k not in ("created_at", "latency_ms")} for line in lines
    ]
