"""The offline lexical judge: tokeniser, normalised BM25 score, grades, fingerprint, fitting."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from grader.cli.main import main
from grader.errors import InputError
from grader.io.judgments import read_judgments
from grader.judges.base import Judge
from grader.judges.lexical.config import (
    LexicalConfig,
    default_config_path,
    load_lexical_config,
    write_thresholds,
)
from grader.judges.lexical.fit import fit_lexical_thresholds, grades_for
from grader.judges.lexical.judge import LexicalJudge, lexical_scores, light_stem, tokenize
from grader.keys import content_key
from grader.models import Doc, Query
from tests.grade_data import write_grade_files

DOCS = [
    Doc(
        doc_id="skiff/retry.py::parse_retry_after",
        text="def parse_retry_after(value):\n    '''Seconds to wait from a Retry-After header.'''",
        metadata={"path": "skiff/retry.py", "symbol": "parse_retry_after"},
    ),
    Doc(
        doc_id="skiff/cache.py::TTLCache.get",
        text="def get(self, key):\n    '''The cached value, or None when it has expired.'''",
        metadata={"path": "skiff/cache.py", "symbol": "TTLCache.get"},
    ),
    Doc(doc_id="skiff/pool.py::ConnectionPool", text="class ConnectionPool: keep-alive per host"),
    Doc(doc_id="empty", text=""),
]


def config_with(thresholds: tuple[float, float, float]) -> LexicalConfig:
    return load_lexical_config().model_copy(update={"thresholds": thresholds})


# --- tokeniser -----------------------------------------------------------------------------


def test_tokenize_splits_code_identifiers_and_paths() -> None:
    cfg = load_lexical_config()
    assert tokenize("getHTTPResponse", cfg) == ["get", "http", "respons"]
    assert tokenize("skiff/retry.py::RetryPolicy.should_retry", cfg) == [
        "skiff",
        "retry",
        "retry",
        "policy",
        "should",
        "retry",
    ]
    # stopwords come from the settings file, not from Python
    assert tokenize("How is the header parsed", cfg) == ["header", "pars"]
    no_stop = LexicalConfig.model_validate({**cfg.model_dump(), "stopwords": (), "stemmer": "none"})
    assert tokenize("How is the header parsed", no_stop) == ["how", "is", "the", "header", "parsed"]


@pytest.mark.parametrize(
    ("words", "stem"),
    [
        (("cache", "caches", "cached", "caching"), "cach"),
        (("retry", "retries", "retried", "retrying"), "retry"),
        (("redirect", "redirects", "redirected"), "redirect"),
        (("stop", "stopped"), "stop"),
    ],
)
def test_light_stem_folds_variants_together(words: tuple[str, ...], stem: str) -> None:
    assert {light_stem(w) for w in words} == {stem}


# --- scoring and judging -------------------------------------------------------------------


def test_score_is_normalised_and_ranks_the_target_first() -> None:
    judge = LexicalJudge(DOCS)
    query = "how is the Retry-After header parsed"
    scores = {d.doc_id: judge.score(query, d).score for d in DOCS}
    assert all(0.0 <= s < 1.0 for s in scores.values())
    assert max(scores, key=scores.__getitem__) == "skiff/retry.py::parse_retry_after"
    assert scores["skiff/pool.py::ConnectionPool"] == 0.0
    assert scores["empty"] == 0.0
    # identical statistics from a dict of docs or a list: the same judge
    assert LexicalJudge({d.doc_id: d for d in DOCS}).fingerprint() == judge.fingerprint()


async def test_judge_returns_an_honest_ok_judgment() -> None:
    judge = LexicalJudge(DOCS)
    assert isinstance(judge, Judge)
    query = Query(query_id="q1", text="how is the Retry-After header parsed")
    key = content_key(judge.fingerprint(), query.text, DOCS[0].text)
    j = await judge.judge(query, DOCS[0], key=key)
    assert (j.status, j.judge, j.key, j.query_id, j.doc_id) == (
        "ok",
        "lexical",
        key,
        "q1",
        DOCS[0].doc_id,
    )
    assert j.grade == judge.grade_of(judge.score(query.text, DOCS[0]).score)
    assert j.grade is not None and j.grade >= 2
    assert j.reason is not None
    assert "not an LLM" in j.reason and "baseline" in j.reason
    t1, t2, t3 = judge.config.thresholds
    assert f"{t1:.3f}/{t2:.3f}/{t3:.3f}" in j.reason
    assert "matched" in j.reason and "retry" in j.reason
    assert j.usage.prompt_tokens == j.usage.completion_tokens == j.usage.cached_tokens == 0
    assert j.cost == 0.0
    assert j.prompt is not None and j.prompt.sha256 == judge.config.sha256


async def test_grade_follows_thresholds_inclusively() -> None:
    judge = LexicalJudge(DOCS)
    query = Query(query_id="q", text="cached value expired")
    score = judge.score(query.text, DOCS[1]).score
    assert 0 < score < 1
    for thresholds, grade in [
        ((score, 0.99, 0.995), 1),
        ((0.0, score, 0.99), 2),
        ((0.0, 0.0, score), 3),
        ((score + 1e-9, 0.99, 0.995), 0),
    ]:
        j = await LexicalJudge(DOCS, config_with(thresholds)).judge(query, DOCS[1], key="sha256:k")
        assert j.grade == grade


async def test_query_without_terms_fails_instead_of_grading_zero() -> None:
    judge = LexicalJudge(DOCS)
    j = await judge.judge(Query(query_id="q", text="how is the"), DOCS[0], key="sha256:k")
    assert j.status == "failed" and j.grade is None
    assert j.error is not None and j.error.type == "NoQueryTerms"


def test_fingerprint_moves_with_thresholds_and_collection() -> None:
    base = LexicalJudge(DOCS)
    again = LexicalJudge(list(reversed(DOCS)))
    refit = LexicalJudge(DOCS, config_with((0.1, 0.2, 0.3)))
    other = LexicalJudge(DOCS[:2])
    fp = base.fingerprint()
    assert fp == again.fingerprint()
    assert fp["algorithm"] and fp["judge"] == "lexical"
    assert refit.fingerprint() != fp and other.fingerprint() != fp
    keys = {content_key(j.fingerprint(), "q", "d") for j in (base, refit, other)}
    assert len(keys) == 3


def test_doc_outside_the_collection_is_scored_on_the_fly() -> None:
    judge = LexicalJudge(DOCS)
    stranger = Doc(doc_id="new", text="parse the Retry-After header")
    assert judge.score("retry after header", stranger).score > 0


def test_lexical_scores_aligns_with_the_judge_and_names_missing_pairs() -> None:
    queries = {
        "q": Query(query_id="q", text="retry after header"),
        "e": Query(query_id="e", text="the"),
    }
    docs = {d.doc_id: d for d in DOCS}
    pairs = [("q", DOCS[0].doc_id), ("q", DOCS[2].doc_id), ("e", DOCS[0].doc_id)]
    scores = lexical_scores(queries, docs, pairs)
    judge = LexicalJudge(docs)
    assert scores[0] == judge.score("retry after header", DOCS[0]).score
    assert scores[1] == 0.0 and np.isnan(scores[2])
    with pytest.raises(InputError, match=r"2 pair\(s\) name a query or document.*\(x, "):
        lexical_scores(queries, docs, [("x", DOCS[0].doc_id), ("q", "nope")])


# --- fitting -------------------------------------------------------------------------------


def qwk(a: np.ndarray, b: np.ndarray) -> float:
    """Quadratic-weighted kappa written out plainly (cross-checked against scikit-learn below)."""
    observed = np.zeros((4, 4))
    np.add.at(observed, (a, b), 1)
    weights = (np.arange(4)[:, None] - np.arange(4)[None, :]) ** 2
    expected = np.outer(observed.sum(1), observed.sum(0)) / len(a)
    denominator = (weights * expected).sum()
    return float(1 - (weights * observed).sum() / denominator) if denominator else -np.inf


def brute_force_best_kappa(scores: np.ndarray, grades: np.ndarray) -> float:
    unique = np.unique(scores)
    cuts = [unique[0], *((unique[1:] + unique[:-1]) / 2), 1.0]
    return max(
        qwk(grades, grades_for(scores, t)) for t in itertools.combinations_with_replacement(cuts, 3)
    )


def test_fit_separable_grades_perfectly() -> None:
    scores = np.array([0.01, 0.05, 0.2, 0.25, 0.5, 0.55, 0.8, 0.9])
    grades = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    t = fit_lexical_thresholds(scores, grades)
    assert t == pytest.approx((0.125, 0.375, 0.675))
    assert grades_for(scores, t).tolist() == grades.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_fit_reaches_the_best_kappa_of_a_brute_force_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    grades = rng.integers(0, 4, size=14)
    scores = np.round(np.clip(grades * 0.2 + rng.normal(0, 0.15, size=14), 0, 0.99), 2)
    t = fit_lexical_thresholds(scores, grades)
    assert t[0] <= t[1] <= t[2]
    achieved = cohen_kappa_score(
        grades, grades_for(scores, t), weights="quadratic", labels=[0, 1, 2, 3]
    )
    assert achieved == pytest.approx(brute_force_best_kappa(scores, grades), abs=1e-9)
    assert fit_lexical_thresholds(scores, grades) == t  # deterministic


def test_fit_with_one_human_grade_maximises_exact_agreement() -> None:
    scores = np.array([0.1, 0.3, 0.6])
    t = fit_lexical_thresholds(scores, np.array([2, 2, 2]))
    assert grades_for(scores, t).tolist() == [2, 2, 2]


def test_fit_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="3 scores but 2 grades"):
        fit_lexical_thresholds(np.array([0.1, 0.2, 0.3]), np.array([0, 1]))
    with pytest.raises(InputError, match="NaN"):
        fit_lexical_thresholds(np.array([np.nan]), np.array([1]))
    with pytest.raises(InputError, match=r"0\.\.3"):
        fit_lexical_thresholds(np.array([0.1]), np.array([4]))
    with pytest.raises(InputError, match="no graded pairs"):
        fit_lexical_thresholds(np.array([]), np.array([]))


# --- settings file -------------------------------------------------------------------------


def test_shipped_default_file_loads() -> None:
    path = default_config_path()
    assert path.name == "lexical-v1.toml"
    cfg = load_lexical_config()
    assert cfg.thresholds == load_lexical_config(path).thresholds
    assert cfg.thresholds[0] <= cfg.thresholds[1] <= cfg.thresholds[2]
    assert "the" in cfg.stopword_set and cfg.stemmer == "light"


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "fitted.toml"
    cfg = write_thresholds(
        out, (0.1, 0.2, 0.4), {"fitted_on": "human.csv", "n": 196, "kappa": 0.66}
    )
    assert load_lexical_config(out).thresholds == (0.1, 0.2, 0.4)
    assert cfg.provenance == {"fitted_on": "human.csv", "n": 196, "kappa": 0.66}
    default = load_lexical_config()
    assert (cfg.k1, cfg.b, cfg.stopwords, cfg.doc_fields) == (
        default.k1,
        default.b,
        default.stopwords,
        default.doc_fields,
    )
    assert cfg.sha256 != default.sha256
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    # provenance alone does not change what the judge computes
    again = write_thresholds(tmp_path / "b.toml", (0.1, 0.2, 0.4), {"other": "note"})
    assert again.sha256 == cfg.sha256


def test_bad_settings_files_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('kind = "lexical-thresholds"\n[thresholds\n')
    with pytest.raises(InputError, match=r"bad\.toml:2: not valid TOML"):
        load_lexical_config(bad)
    bad.write_text('kind = "prompt"\n')
    with pytest.raises(InputError, match="not a lexical settings file"):
        load_lexical_config(bad)
    bad.write_text(
        'kind = "lexical-thresholds"\n[scoring]\n[thresholds]\nt1 = 0.5\nt2 = 0.2\nt3 = 0.9\n'
    )
    with pytest.raises(InputError, match="not ascending"):
        load_lexical_config(bad)
    bad.write_text('kind = "lexical-thresholds"\n[scoring]\n[thresholds]\nt1 = 0.1\n')
    with pytest.raises(InputError, match=r"\[thresholds\] lacks t2, t3"):
        load_lexical_config(bad)
    with pytest.raises(InputError, match="not ascending"):
        write_thresholds(tmp_path / "x.toml", (0.3, 0.2, 0.1), {})


def test_fitted_lexical_settings_are_said_and_never_share_a_key_with_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RELGRADE_LEXICAL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    args = files.args("--judge", "lexical", "--store", "s.db", "--quiet")
    assert main([*args, "--out", "default.jsonl"]) == 0
    err = capsys.readouterr().err
    assert "lexical judge settings: " in err and "lexical-v1.toml (the shipped default" in err
    default = read_judgments(tmp_path / "default.jsonl")
    assert {j.judge for j in default} == {"lexical"}  # as before: default stores keep hitting
    assert main(args) == 0
    assert "graded 0, cached 12" in capsys.readouterr().err

    # What calibrate --fit-lexical leaves in the working folder, read without being named.
    fitted_file = tmp_path / "relgrade-lexical.toml"
    fitted_file.write_text(
        'kind = "lexical-thresholds"\nname = "lexical"\nversion = "1"\n[scoring]\n'
        "[thresholds]\nt1 = 0.1\nt2 = 0.3\nt3 = 0.6\n",
        encoding="utf-8",
    )
    assert main([*args, "--out", "fitted.jsonl"]) == 0
    err = capsys.readouterr().err
    assert "lexical judge settings: relgrade-lexical.toml (not the shipped default" in err
    assert "graded 12, cached 0" in err  # nothing taken from the default's answers
    fitted = read_judgments(tmp_path / "fitted.jsonl")
    (judge_id,) = {j.judge for j in fitted}
    assert fitted[0].prompt is not None
    assert judge_id == f"lexical+{fitted[0].prompt.sha256[:8]}" and judge_id in err
    assert not {j.key for j in default} & {j.key for j in fitted}
