"""`more_for_0_05`: the forecast lets the sequence's spread shrink as it will (the prior fades,
the early terms weigh less), so it does not over-forecast as the current-spread rule did.
bench/calibrate_coverage.py (part `sequence`) measures both on TREC DL 2019."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.spotcheck.sequential import uniform_draw_probabilities
from calibration.stats import confseq
from tests.helpers.spotcheck_sim import synthetic_population


def _path(seed: int, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    _, y, f, _ = synthetic_population()
    order = np.random.default_rng(seed).permutation(y.size)[:length]
    return y[order], f[order], uniform_draw_probabilities(length, y.size), f


def test_the_forecast_is_the_first_n_whose_projected_half_width_reaches_the_target() -> None:
    y, f, p, f_all = _path(1, 120)
    seq = confseq.share_sequence(y, f, p, f_all)
    assert seq.ss is not None and seq.v_future is not None
    more = seq.more_for(0.05)
    assert more > 0

    def half(big: int) -> float:
        sd = confseq.projected_sd(big, seq.n, seq.ss or 0.0, seq.v_future or 0.0)
        return float(sd) * float(confseq.boundary(big))

    assert half(seq.n + more) <= 0.05 < half(seq.n + more - 1)
    # today's spread, projected: the prior's share is what `running` gives at n
    assert confseq.projected_sd(seq.n, seq.n, seq.ss, seq.v_future) == pytest.approx(seq.sd)
    # it never asks for more than the current-spread rule
    assert more <= confseq.more_for(0.05, seq.n, seq.sd)


def test_no_more_grades_once_the_target_is_reached() -> None:
    y, f, p, f_all = _path(2, 3000)
    seq = confseq.share_sequence(y, f, p, f_all)
    assert seq.half_width <= 0.05
    assert seq.more_for(0.05) == 0


def test_forecast_against_the_grades_paths_needed() -> None:
    """40 uniform paths of the synthetic population: after 100 grades, the forecast over the
    grades each path needed to reach +-0.05 is nearer 1 than the current-spread rule's."""
    _, y_all, f_all, _ = synthetic_population()
    length = 1500
    p = uniform_draw_probabilities(length, y_all.size)
    rng = np.random.default_rng(11)
    new, old = [], []
    for _ in range(40):
        order = rng.permutation(y_all.size)[:length]
        y, f = y_all[order], f_all[order]
        z = confseq.desraj_terms(y, f, p, float(f_all.sum()), y_all.size)
        _, sd = confseq.running(z)
        half = sd * confseq.boundary(np.arange(1, length + 1))
        reached = np.flatnonzero(half <= 0.05)
        reached = reached[reached >= 100]
        assert reached.size
        needed = int(reached[0]) + 1 - 100
        seq = confseq.share_sequence(y[:100], f[:100], p[:100], f_all)
        new.append(seq.more_for(0.05) / needed)
        old.append(confseq.more_for(0.05, 100, seq.sd) / needed)
    assert abs(np.median(new) - 1) < abs(np.median(old) - 1)
    assert 0.85 <= np.median(new) <= 1.15
