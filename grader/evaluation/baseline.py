"""`evaluate --baseline NAME`: every other run against the baseline, measure by measure, on the
queries both are scored on (COLUMNS; `significance`, docs/significance.md). A count is compared
by its sum; Judged@k (how far the labels reach) is neither tested nor counted."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.errors import InputError
from grader.evaluation.significance import (
    PERMUTATIONS,
    Correction,
    Test,
    adjust,
    paired_differences,
)
from grader.metrics.evaluate import Scores
from grader.metrics.measures import is_summed

COLUMNS = ("diff", "p_value", "p_adjusted", "diff_ci_low", "diff_ci_high")
"""The keys a comparison adds to the "all" records (None on the baseline's own)."""
ALPHA = 0.05
"""The level at which the table marks a run as different from the baseline (p_adjusted)."""
TEST_NAMES = {"t": "paired t test", "randomization": "paired randomization test"}
TEST_NAMES["bootstrap"] = "paired bootstrap test"
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "none": "no correction"}


@dataclass(frozen=True)
class Options:
    """What `--baseline`, `--test`, `--permutations`, `--seed` and `--correction` ask for."""

    baseline: str
    test: Test = "t"
    permutations: int = PERMUTATIONS
    seed: int = 0
    correction: Correction = "holm"


@dataclass(frozen=True)
class Comparison:
    """One run against the baseline on one measure, over `n` paired queries."""

    run: str
    measure: str
    n: int
    diff: float
    p_value: float
    p_adjusted: float
    diff_ci_low: float
    diff_ci_high: float

    def columns(self) -> dict[str, float | None]:
        """The record keys (COLUMNS), NaN as None (null in JSON)."""
        return {c: clean(getattr(self, c)) for c in COLUMNS}

    @property
    def significant(self) -> bool:
        return not math.isnan(self.p_adjusted) and self.p_adjusted < ALPHA


@dataclass
class Comparisons:
    """Every comparison with the baseline `baseline`, in run then measure order."""

    baseline: str
    options: Options
    rows: list[Comparison] = field(default_factory=list)

    def get(self, run: str, measure: str) -> Comparison | None:
        return next((c for c in self.rows if (c.run, c.measure) == (run, measure)), None)

    def annotate(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The "all" records with COLUMNS added (None on the baseline's and where nothing was
        compared); per-query records as they are."""
        for record in records:
            if record["query_id"] != "all":
                continue
            found = self.get(record["run"], record["measure"])
            record.update(found.columns() if found else dict.fromkeys(COLUMNS))
        return records

    def legend(self) -> str:
        """One line: what the mark means, the test and the correction."""
        o = self.options
        family = len([c for c in self.rows if not math.isnan(c.p_value)])
        test = f"{TEST_NAMES[o.test]}, two-sided"
        n = max((c.n for c in self.rows), default=0)
        if o.test == "randomization" and n < 63 and 1 << n <= o.permutations:
            test += f", exact over all 2^{n} sign patterns; interval: bootstrap, seed {o.seed}"
        elif o.test != "t":
            draws = "sign flips" if o.test == "randomization" else "resamples"
            test += f", {o.permutations:,} {draws}, seed {o.seed}"
        correction = CORRECTION_NAMES[o.correction]
        if o.correction != "none":
            correction += f" over {family} comparison{'' if family == 1 else 's'}"
        return (
            f"* differs from the baseline {self.baseline} at p_adjusted < {ALPHA} "
            f"({test}; {correction})"
        )


def baseline_name(
    given: str, names: Sequence[str], sources: Sequence[str | None], flag: str
) -> str:
    """The run `given` names (a name as printed, or its path); fewer than two runs or an unknown
    name is an InputError naming `flag`."""
    if len(names) < 2:
        raise InputError(
            f"{flag.rstrip(' =')} compares runs with a baseline: give at least two runs "
            f"(got {len(names)})",
            hint="add the run(s) to compare with the baseline",
        )
    if given in names:
        return given
    for name, source in zip(names, sources, strict=True):
        if source is not None and os.path.normpath(given) == os.path.normpath(source):
            return name
        with contextlib.suppress(OSError):
            if source is not None and os.path.samefile(given, source):
                return name
    raise InputError(
        f"{flag}{given!r} is not one of the runs: {', '.join(names)}",
        hint="give a run's name as printed (its file stem) or the path it was read from",
    )


def compare(results: Sequence[tuple[str, Scores]], options: Options) -> Comparisons:
    """Every run of `results` but the baseline (`options.baseline`, a name among them)
    against it, on every measure, the p-values corrected as one family."""
    base = dict(results)[options.baseline]
    pending: list[tuple[str, str, Any]] = []
    for run, scores in results:
        if run == options.baseline:
            continue
        for measure in scores.measures:
            if measure.startswith("Judged"):
                continue  # the labels' coverage, not the run's effectiveness: not tested
            d = _differences(scores, base, measure)
            paired = paired_differences(
                d, options.test, permutations=options.permutations, seed=options.seed
            )
            pending.append((run, measure, paired))
    adjusted = adjust([p.p_value for _, _, p in pending], options.correction)
    comparisons = Comparisons(options.baseline, options)
    for (run, measure, p), p_adjusted in zip(pending, adjusted.tolist(), strict=True):
        s = p.n if is_summed(measure) else 1  # a count is compared by its sum
        row = (p.n, p.diff * s, p.p_value, p_adjusted, p.ci_low * s, p.ci_high * s)
        comparisons.rows.append(Comparison(run, measure, *row))
    return comparisons


def _differences(run: Scores, base: Scores, measure: str) -> Any:
    """Per-query differences run - baseline on `measure`, over the queries both are scored on."""
    mine = dict(zip(run.query_ids, run.values[run.measures.index(measure)].tolist(), strict=True))
    theirs = base.values[base.measures.index(measure)].tolist()
    pairs = [(mine[q], b) for q, b in zip(base.query_ids, theirs, strict=True) if q in mine]
    if not pairs:
        return np.zeros(0)
    values = np.asarray(pairs, dtype=np.float64)
    return values[:, 0] - values[:, 1]


def clean(value: Any) -> Any:
    """NaN as None (null in JSON)."""
    return None if isinstance(value, float) and math.isnan(value) else value
