"""The paired tests and corrections of `grader.evaluation.significance` against references: the t
test and its interval against scipy's `ttest_rel`, the t distribution against scipy.stats.t,
Holm and Bonferroni against statsmodels' `multipletests`, the bootstrap interval against
`scipy.stats.bootstrap` (percentile), the randomization test by exact enumeration on small cases
computed by hand, and its Monte Carlo p-value against the exact one."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from grader.evaluation.significance import (
    Correction,
    Paired,
    Test,
    adjust,
    paired_differences,
    t_quantile,
    two_sided_p,
)


def paired_test(run: Any, base: Any, test: Test = "t", **options: Any) -> Paired:
    """The test on two runs' per-query scores (their differences, as `compare` gives them)."""
    d = np.asarray(run, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    return paired_differences(d, test, **options)


ALL_TESTS: tuple[Test, ...] = ("t", "randomization", "bootstrap")
FAMILY_CORRECTIONS: tuple[Correction, ...] = ("holm", "bonferroni")


def _pair(seed: int, n: int, shift: float = 0.03) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    return np.clip(base + rng.normal(shift, 0.15, n), 0, 1), base


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 42, 100, 999, 5000])
def test_t_distribution_equals_scipy(df: int) -> None:
    for t in (0.0, 0.05, 0.5, 1.0, 1.96, 2.5, 4.0, 8.0, 25.0):
        assert two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-10, abs=1e-300)
    for level in (0.5, 0.9, 0.95, 0.99):
        assert t_quantile(level, df) == pytest.approx(stats.t.ppf(0.5 + level / 2, df), rel=1e-10)


@pytest.mark.parametrize(("seed", "n"), [(0, 2), (1, 3), (2, 10), (3, 43), (4, 200), (5, 1000)])
def test_t_test_equals_scipy_ttest_rel(seed: int, n: int) -> None:
    run, base = _pair(seed, n)
    got = paired_test(run, base, "t")
    ref = stats.ttest_rel(run, base)
    ci = ref.confidence_interval(0.95)
    assert got.n == n
    assert got.diff == pytest.approx(float(np.mean(run - base)), abs=1e-12)
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
    assert got.ci_low == pytest.approx(ci.low, abs=1e-9)
    assert got.ci_high == pytest.approx(ci.high, abs=1e-9)


def test_t_test_without_spread() -> None:
    """Equal differences: p is 1 when they are all 0, 0 otherwise; scipy says NaN there."""
    assert paired_test([0.5, 0.2, 0.1], [0.5, 0.2, 0.1]) == Paired(3, 0.0, 1.0, 0.0, 0.0)
    same = paired_test([0.75, 0.5, 0.25], [0.5, 0.25, 0.0])
    assert same.p_value == 0.0 and same.ci_low == same.ci_high == 0.25


@pytest.mark.parametrize("test", ALL_TESTS)
def test_fewer_than_two_queries_give_no_p_value(test: Test) -> None:
    one = paired_differences([0.25], test)
    assert one.n == 1 and one.diff == 0.25
    assert math.isnan(one.p_value) and math.isnan(one.ci_low) and math.isnan(one.ci_high)
    none = paired_differences([], test)
    assert none.n == 0 and math.isnan(none.diff) and math.isnan(none.p_value)


def test_randomization_exact_by_hand() -> None:
    """d = (1, 2, 3): the 8 sign patterns sum to +-6, +-4, +-2, 0, 0; |sum| >= 6 in 2 of 8."""
    assert paired_differences([1, 2, 3], "randomization").p_value == 0.25
    # a zero difference doubles every pattern: 4 of 16
    assert paired_differences([1, 2, 3, 0], "randomization").p_value == 0.25
    # d = (1, 1, 1, 1, -1): |sum| >= 3 for sums +-5, +-3 -> patterns with at most one sign
    # against the majority: 2 * (1 + 5) = 12 of 32
    assert paired_differences([1, 1, 1, 1, -1], "randomization").p_value == 12 / 32
    # all differences 0: every pattern ties with the observed 0
    assert paired_differences([0.0, 0.0, 0.0], "randomization").p_value == 1.0


def _enumerated(d: np.ndarray) -> float:
    observed = abs(d.sum())
    sums = [abs(np.dot(signs, d)) for signs in itertools.product((1, -1), repeat=d.size)]
    return sum(bool(s >= observed - 1e-12) for s in sums) / (1 << d.size)


@pytest.mark.parametrize("seed", range(5))
def test_randomization_exact_equals_plain_enumeration(seed: int) -> None:
    run, base = _pair(seed, 11, shift=0.05)
    got = paired_test(run, base, "randomization", permutations=2**11)
    assert got.p_value == _enumerated(run - base)


@pytest.mark.parametrize("seed", range(3))
def test_randomization_sampled_within_monte_carlo_error_of_exact(seed: int) -> None:
    """2^16 patterns exist: 10,000 random ones estimate the exact p within its binomial error."""
    run, base = _pair(seed, 16, shift=0.06)
    exact = paired_test(run, base, "randomization", permutations=2**16).p_value
    sampled = paired_test(run, base, "randomization", permutations=10_000, seed=seed).p_value
    error = math.sqrt(exact * (1 - exact) / 10_000)
    assert abs(sampled - exact) <= 4.5 * error + 1e-4
    again = paired_test(run, base, "randomization", permutations=10_000, seed=seed).p_value
    assert again == sampled  # the seed fixes the draws


@pytest.mark.parametrize(("seed", "n", "resamples"), [(0, 5, 999), (1, 43, 10_000), (2, 300, 2000)])
def test_bootstrap_interval_equals_scipy_percentile(seed: int, n: int, resamples: int) -> None:
    run, base = _pair(seed, n)
    got = paired_test(run, base, "bootstrap", permutations=resamples, seed=seed)
    ref = stats.bootstrap(
        (run, base),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        paired=True,
        method="percentile",
        n_resamples=resamples,
        rng=np.random.default_rng(seed),
    )
    assert got.ci_low == pytest.approx(ref.confidence_interval.low, abs=1e-12)
    assert got.ci_high == pytest.approx(ref.confidence_interval.high, abs=1e-12)
    # the p-value: resampled means shifted to the null, as far from 0 as the observed mean
    shifted = ref.bootstrap_distribution - got.diff
    expected = np.mean(np.abs(shifted) >= abs(got.diff) - 1e-12)
    assert got.p_value == pytest.approx(expected, abs=1 / resamples)


def test_randomization_interval_is_the_bootstrap_interval() -> None:
    run, base = _pair(7, 43)
    randomization = paired_test(run, base, "randomization", seed=3)
    bootstrap = paired_test(run, base, "bootstrap", seed=3)
    assert (randomization.ci_low, randomization.ci_high) == (bootstrap.ci_low, bootstrap.ci_high)


def test_tests_agree_on_a_clear_difference_and_on_none() -> None:
    run, base = _pair(11, 43, shift=0.2)
    for test in ALL_TESTS:
        clear = paired_test(run, base, test)
        assert clear.p_value < 0.001 and clear.ci_low > 0
    noise, base = _pair(12, 43, shift=0.0)
    for test in ALL_TESTS:
        none = paired_test(noise, base, test)
        assert none.ci_low < none.diff < none.ci_high


@pytest.mark.parametrize("method", FAMILY_CORRECTIONS)
def test_corrections_equal_statsmodels(method: Correction) -> None:
    rng = np.random.default_rng(5)
    for size in (1, 2, 7, 30):
        p = rng.uniform(0, 0.2, size)
        p[rng.integers(0, size)] = 0.0
        got = adjust(p, method)
        ref = multipletests(p, method=method)[1]
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)


def test_holm_by_hand_and_nan_left_out() -> None:
    """p = (0.01, 0.04, 0.03, NaN): m = 3; sorted 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 -> 0.06."""
    got = adjust([0.01, 0.04, 0.03, float("nan")], "holm")
    np.testing.assert_allclose(got[:3], [0.03, 0.06, 0.06], rtol=1e-15)
    assert math.isnan(got[3])
    np.testing.assert_allclose(adjust([0.01, 0.5], "bonferroni"), [0.02, 1.0])
    np.testing.assert_array_equal(adjust([0.01, 0.5], "none"), [0.01, 0.5])


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="test must be"):
        paired_differences([1.0, 2.0], "wilcoxon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="permutations"):
        paired_differences([1.0, 2.0], "bootstrap", permutations=0)
    with pytest.raises(ValueError, match="correction"):
        adjust([0.1], "fdr")  # type: ignore[arg-type]


@pytest.mark.parametrize("test", ALL_TESTS)
def test_batches_of_draws_do_not_change_the_result(
    test: Test, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Draws are made in batches that fit in memory; a batch of another size gives the same
    p-value and interval (exact enumeration and the seeded draws alike)."""
    import grader.evaluation.significance as significance

    for n, permutations in ((12, 10_000), (43, 3_000)):
        run, base = _pair(n, n, shift=0.04)
        whole = paired_test(run, base, test, permutations=permutations, seed=5)
        monkeypatch.setattr(significance, "_CELLS", 7 * n + 3)
        batched = paired_test(run, base, test, permutations=permutations, seed=5)
        monkeypatch.undo()
        assert batched == whole
