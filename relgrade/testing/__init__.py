"""Conformance checks for plug-ins: the tests relgrade runs on everything registered
(tests/test_plugin_conformance.py), for a plug-in author to call from a test of theirs.

>>> from relgrade.testing import check_judge, check_measure
>>> check_measure("ToyRBP")          # doctest: +SKIP
>>> check_judge("toylen")            # doctest: +SKIP

Each raises AssertionError saying what the plug-in gets wrong: `check_measure` on random graded
lists (the list function equals the vectorised one, the cutoff is honoured, the names print back
to themselves), `check_judge` on one pair (a stable fingerprint, answers under the key asked).
Installed plug-ins load here as in the commands (`RELGRADE_LOAD_PLUGINS`).

`check_measure` calls the list function by its parameters' names: `rels` (the grades in rank
order, None for unjudged), `judged` or `ideal` (every judged grade of the query), `k` (the
cutoff), `threshold` (the `rel=`), `n_relevant` and `n_nonrelevant` (judged grades at or above,
and below, the threshold), `gain` (nDCG's), and the measure's own parameters by their keys.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from grader.errors import JudgeError
from grader.judges.base import Judge, check_key
from grader.judges.registry import JudgeSettings, build_judges, judge_kind
from grader.keys import canonical_json, content_key
from grader.metrics import registry
from grader.metrics.evaluate import score
from grader.metrics.join_arrow import join
from grader.metrics.measures import Measure, parse_measure
from grader.models import Doc, Judgment, Query

__all__ = ["check_judge", "check_measure"]

THRESHOLDS = (1, 2, 3)
CUTOFFS = (1, 3, 5, 10)
TOL = 1e-9

Case = tuple[dict[str, dict[str, int]], dict[str, list[str]]]
"""qrels {query: {doc: grade}} and a run {query: [doc in rank order]}."""


def check_measure(
    name: str, *, params: Mapping[str, str] | None = None, seed: int = 0, queries: int = 200
) -> None:
    """Check the registered measure `name` (any spelling) on random qrels and a run of
    `queries` queries (drawn from `seed`), its own parameters at their defaults or as `params`
    writes them (`{"p": "0.5"}`; needed for a parameter without a default). AssertionError says
    what is wrong."""
    definition = registry.find(name)
    assert definition is not None, f"no measure named {name!r} is registered"
    case = random_case(np.random.default_rng(seed), queries)
    for measure in variants(definition, params or {}):
        check_name(definition, measure)
        kernel = kernel_values(measure, case)
        if definition.list_function is not None:
            check_list_function(definition.list_function, measure, case, kernel)
        if measure.cutoff is not None and not measure.judged_only:  # condensed: below k counts
            check_cutoff(measure, case, kernel)


def variants(definition: registry.MeasureDef, own: Mapping[str, str]) -> Iterator[Measure]:
    """The measure at each threshold, cutoff and gain it takes, on the whole and on the condensed
    list (`judged_only=True`) when it takes that, its own parameters as `own` writes them (the
    others at their defaults)."""
    thresholds: tuple[int | None, ...] = THRESHOLDS if definition.rel else (None,)
    cutoffs: tuple[int | None, ...] = {
        "optional": (None, *CUTOFFS),
        "required": CUTOFFS,
        "none": (None,),
    }[definition.cutoff]
    gains: tuple[str | None, ...] = ("linear", "exp") if definition.gain else (None,)
    condensed = (False, True) if definition.judged_only else (False,)
    for rel, k, gain, judged_only in itertools.product(thresholds, cutoffs, gains, condensed):
        params = [f"rel={rel}"] if rel is not None else []
        params += ["gain=exp"] if gain == "exp" else []
        params += ["judged_only=True"] if judged_only else []
        params += [f"{key}={value}" for key, value in own.items()]
        text = definition.name + (f"({','.join(params)})" if params else "")
        yield parse_measure(text + (f"@{k}" if k is not None else ""))


def check_name(definition: registry.MeasureDef, measure: Measure) -> None:
    """The name prints back to itself, in any case, and keeps what it says."""
    text = str(measure)
    assert parse_measure(text) == measure, f"{text} parses to {parse_measure(text)}"
    assert str(parse_measure(text)) == text, f"{text} prints back as {parse_measure(text)}"
    assert measure.name == definition.name, f"{text} is of {measure.name}, not {definition.name}"
    for spelling in (definition.name, *definition.aliases):
        other = spelling.swapcase() + text[len(definition.name) :]
        assert parse_measure(other) == measure, f"{other} parses to {parse_measure(other)}"


def random_case(rng: np.random.Generator, n_queries: int = 6) -> Case:
    """Random qrels and run: grades 0..3, unjudged results, queries without relevant documents,
    rankings shorter and longer than the cutoffs."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs = [f"d{q}_{i}" for i in range(int(rng.integers(1, 15)))]
        grades = rng.integers(0, 4, len(docs))
        if rng.random() < 0.15:
            grades = np.zeros_like(grades)  # no relevant document
        qrels[qid] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        pool = docs + [f"u{q}_{i}" for i in range(int(rng.integers(0, 8)))]
        size = int(rng.integers(1, len(pool) + 1))
        run[qid] = [str(d) for d in rng.choice(pool, size=size, replace=False)]
    return qrels, run


def kernel_values(measure: Measure, case: Case, depth: int | None = None) -> dict[str, float]:
    """The vectorised function per query, on the run cut to its top `depth` when given."""
    qrels, run = case
    rows = [(q, d, g) for q, judged in qrels.items() for d, g in judged.items()]
    qrels_frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
    ranked = [(q, d, r) for q, docs in run.items() for r, d in enumerate(docs[:depth], 1)]
    run_frame = pd.DataFrame(ranked, columns=["query_id", "doc_id", "rank"])
    scores = score(join(qrels_frame, run_frame), [measure])
    return dict(zip(scores.query_ids, scores.values[0].tolist(), strict=True))


def check_list_function(
    function: Callable[..., float], measure: Measure, case: Case, kernel: dict[str, float]
) -> None:
    """The list function on each query's graded list equals the vectorised value."""
    qrels, run = case
    for qid, judged in qrels.items():
        rels = [judged.get(d) for d in run[qid]]
        if measure.judged_only:
            rels = [g for g in rels if g is not None]
        value = float(function(**list_arguments(function, measure, rels, list(judged.values()))))
        assert math.isclose(value, kernel[qid], rel_tol=0, abs_tol=TOL), (
            f"{measure} on {qid}: the list function gives {value}, the vectorised function "
            f"{kernel[qid]} (grades in rank order {rels}, judged {sorted(judged.values())})"
        )


def list_arguments(
    function: Callable[..., float], measure: Measure, rels: list[int | None], judged: list[int]
) -> dict[str, Any]:
    """The keyword arguments of the list function for one query (see the module docstring)."""
    t = measure.rel
    known: dict[str, Any] = {
        "rels": rels,
        "judged": judged,
        "ideal": judged,
        "k": measure.cutoff,
        "threshold": t,
        "n_relevant": sum(g >= t for g in judged) if t is not None else None,
        "n_nonrelevant": sum(0 <= g < t for g in judged) if t is not None else None,
        "gain": measure.gain,
        **dict(measure.params),
    }
    arguments: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        required = parameter.default is inspect.Parameter.empty
        if parameter.name in known and (known[parameter.name] is not None or required):
            arguments[parameter.name] = known[parameter.name]
        elif parameter.default is inspect.Parameter.empty and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            raise AssertionError(
                f"{measure}: the list function's parameter {parameter.name!r} is none of "
                f"{', '.join(known)} (relgrade.testing)"
            )
    return arguments


def check_cutoff(measure: Measure, case: Case, kernel: dict[str, float]) -> None:
    """Nothing ranked below k changes the value at @k: the run cut to its top k scores the same."""
    assert measure.cutoff is not None
    cut = kernel_values(measure, case, depth=measure.cutoff)
    for qid, value in kernel.items():
        assert math.isclose(value, cut[qid], rel_tol=0, abs_tol=TOL), (
            f"{measure} on {qid}: {value} on the whole run, {cut[qid]} on its top "
            f"{measure.cutoff}: the cutoff is not honoured"
        )


QUERY = Query(query_id="conformance-q1", text="how does the cache evict old entries")
DOC = Doc(
    doc_id="conformance-d1",
    text="The cache evicts the least recently used entry when it is full; old entries go first.",
)


def check_judge(
    kind: str,
    settings: JudgeSettings | None = None,
    *,
    query: Query = QUERY,
    doc: Doc = DOC,
) -> None:
    """Check the registered judge kind `kind` built from `settings` (default: no model, no
    endpoint, and `doc` as the collection for kinds that read every document): two builds give
    the same fingerprints and content keys, and each judge answers (query, doc) under the key it
    is asked with. AssertionError says what is wrong."""
    definition = judge_kind(kind)
    if settings is None:
        docs = {doc.doc_id: doc} if definition.needs_all_docs else {}
        settings = JudgeSettings(docs=docs)
    first, second = build_judges(kind, settings), build_judges(kind, settings)
    assert len(first) == len(second), f"judge {kind!r}: two builds made different numbers"
    for one, two in zip(first, second, strict=True):
        _check_fingerprint(kind, one, two)
        key = content_key(one.fingerprint(), query.text, doc.text)
        judgment = asyncio.run(one.judge(query, doc, key=key))
        _check_answer(kind, one, judgment, key, query, doc)


def _check_fingerprint(kind: str, one: Judge, two: Judge) -> None:
    """The same settings, the same fingerprint, JSON-able (so the same content key)."""
    try:
        text = canonical_json(one.fingerprint())
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"judge {kind!r}: its fingerprint is not plain JSON ({exc})") from exc
    assert text == canonical_json(two.fingerprint()), (
        f"judge {kind!r}: two builds from the same settings have different fingerprints "
        f"({text} and {canonical_json(two.fingerprint())}): every rerun would grade again"
    )
    assert one.fingerprint() == one.fingerprint(), f"judge {kind!r}: fingerprint() changes"
    assert one.judge_id == two.judge_id, f"judge {kind!r}: two builds have two judge ids"


def _check_answer(
    kind: str, judge: Judge, judgment: Judgment, key: str, query: Query, doc: Doc
) -> None:
    """The answer is a Judgment under `key`, for (query, doc), by `judge`."""
    assert isinstance(judgment, Judgment), f"judge {kind!r} answered {type(judgment).__name__}"
    try:
        check_key(judge, judgment, key)
    except JudgeError as exc:
        raise AssertionError(f"judge {kind!r}: {exc}") from exc
    got = (judgment.query_id, judgment.doc_id, judgment.judge)
    wanted = (query.query_id, doc.doc_id, judge.judge_id)
    assert got == wanted, f"judge {kind!r}: answered for (query, doc, judge) {got}, not {wanted}"
