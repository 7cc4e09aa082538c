"""`relgrade.evaluate(..., baseline=NAME)`: the options of `evaluate --baseline`, checked as
the Python API names them (`grader.evaluation.baseline` compares)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from grader.errors import InputError
from grader.evaluation.baseline import Options, baseline_name
from grader.evaluation.significance import CORRECTIONS, TESTS, Correction, Test
from grader.io.python_inputs import is_path, run_inputs


def baseline_comparison(
    baseline: Any, runs: Any, test: str, permutations: int, seed: int, correction: str
) -> Callable[[Sequence[str]], Options] | None:
    """The options of `baseline=` from the runs' names, in the order `run_inputs(runs)` gives
    them (None without a baseline); its choices are checked at once, before any input is read."""
    if baseline is None:
        return None
    if test not in TESTS:
        raise InputError(f"test={test!r} is not a test", hint=f"one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        hint = f"one of {', '.join(CORRECTIONS)}"
        raise InputError(f"correction={correction!r} is not a correction", hint=hint)
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise InputError(f"permutations must be a whole number >= 1, not {permutations!r}")

    def options(names: Sequence[str]) -> Options:
        sources = [str(run) if is_path(run) else None for _, run in run_inputs(runs)]
        name = baseline_name(str(baseline), names, sources, "baseline=")
        return Options(
            name, cast(Test, test), permutations, int(seed), cast(Correction, correction)
        )

    return options
