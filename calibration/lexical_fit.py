"""`calibrate --fit-lexical`: fit the lexical judge's three thresholds on human grades (maximising
quadratic-weighted kappa) and write a complete settings file, by default the one `grade --judge
lexical` reads next (`./relgrade-lexical.toml`); the shipped default is never overwritten."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from calibration.join import pair_keys
from calibration.stats.agreement import agreement
from grader.errors import InputError
from grader.io.docs import read_docs, read_queries
from grader.io.grades import read_human_grades
from grader.judges.lexical.config import (
    default_config_path,
    fitted_config_path,
    load_lexical_config,
    write_thresholds,
)
from grader.judges.lexical.fit import fit_lexical_thresholds, grades_for
from grader.judges.lexical.judge import lexical_scores


def fit_and_write(
    human_path: str | Path,
    queries_path: str | Path,
    docs_path: str | Path,
    out_path: str | Path | None = None,
    *,
    clamp: bool = False,
) -> dict[str, Any]:
    """Fit thresholds on the human grades, write the settings file, and return n, dropped,
    thresholds, path and the fitted grades' kappas against the human ones."""
    human = read_human_grades(human_path, clamp=clamp)
    queries = read_queries(queries_path)
    docs = read_docs(docs_path)
    pairs = pair_keys(human)
    scores = lexical_scores(queries, docs, pairs)
    keep = np.isfinite(scores)
    if not keep.any():
        raise InputError(
            "no human-graded pair has a query with scorable terms",
            path=queries_path,
            hint="check that the queries file matches the grades",
        )
    grades = human["grade"].to_numpy(dtype=np.int64)[keep]
    thresholds = fit_lexical_thresholds(scores[keep], grades)
    fitted = agreement(grades, grades_for(scores[keep], thresholds))
    target = Path(out_path) if out_path is not None else fitted_config_path()
    provenance: dict[str, Any] = {"fitted_on": str(human_path), "pairs": int(keep.sum())}
    kappa = fitted["weighted_kappa_quadratic"]
    if kappa is not None and math.isfinite(kappa):
        # An undefined kappa (e.g. one grade only) is left out: TOML has no null, and 0 would lie.
        provenance["weighted_kappa_quadratic"] = kappa
    base = load_lexical_config(target if target.is_file() else default_config_path())
    write_thresholds(target, thresholds, provenance, config=base)
    return {
        "n": int(keep.sum()),
        "dropped": int((~keep).sum()),
        "thresholds": list(thresholds),
        "path": str(target),
        **{k: fitted[k] for k in ("cohen_kappa", "weighted_kappa_quadratic", "exact_agreement")},
    }
