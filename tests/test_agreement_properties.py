"""Invariants of the agreement figures that must hold for any grades (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.stats.agreement import agreement
from tests.helpers.hypothesis_scale import examples

grades = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=60)


@settings(max_examples=examples(150), deadline=None)
@given(grades)
def test_figures_stay_in_range_and_swap_sides_sensibly(pairs: list[tuple[int, int]]) -> None:
    h = np.array([a for a, _ in pairs])
    m = np.array([b for _, b in pairs])
    out = agreement(h, m)
    swapped = agreement(m, h)
    assert 0.0 <= out["exact_agreement"] <= out["within_one"] <= 1.0
    assert sum(map(sum, out["confusion"])) == len(pairs)
    for key in ("cohen_kappa", "weighted_kappa_linear", "weighted_kappa_quadratic"):
        if out[key] is not None:
            assert -1.0 - 1e-9 <= out[key] <= 1.0 + 1e-9
            # kappa is symmetric in the two raters
            assert abs(out[key] - swapped[key]) < 1e-9
    if out["krippendorff_alpha_ordinal"] is not None:
        assert abs(out["krippendorff_alpha_ordinal"] - swapped["krippendorff_alpha_ordinal"]) < 1e-9
    assert abs(out["mean_bias"] + swapped["mean_bias"]) < 1e-12
    assert out["confusion"] == [list(row) for row in zip(*swapped["confusion"], strict=True)]


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=60))
def test_identical_grades_agree_perfectly(values: list[int]) -> None:
    out = agreement(values, values)
    assert out["exact_agreement"] == 1.0
    assert out["mean_bias"] == 0.0
    if len(set(values)) > 1:
        assert abs(out["cohen_kappa"] - 1.0) < 1e-12
        assert abs(out["weighted_kappa_quadratic"] - 1.0) < 1e-12
        assert abs(out["krippendorff_alpha_ordinal"] - 1.0) < 1e-12


@settings(max_examples=examples(100), deadline=None)
@given(grades, st.floats(0.1, 100.0))
def test_scaling_all_weights_changes_nothing(pairs: list[tuple[int, int]], scale: float) -> None:
    h = np.array([a for a, _ in pairs])
    m = np.array([b for _, b in pairs])
    ones = agreement(h, m, np.ones(len(pairs)))
    scaled = agreement(h, m, np.full(len(pairs), scale))
    for key in ("cohen_kappa", "weighted_kappa_quadratic", "mean_bias", "exact_agreement"):
        if ones[key] is None:
            assert scaled[key] is None
        else:
            assert abs(ones[key] - scaled[key]) < 1e-9
