"""System-ranking agreement under LLM and human labels: Kendall's tau-b, Spearman's rho (no scipy
at run time) and tau_AP (Yilmaz et al., SIGIR 2008: a swap near the top weighs more; a tie in
the human ranking counts half, one in the LLM order is broken by run name)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.stats.agreement import percentile_interval, resampled_confusions, to_float
from grader.metrics.kappa import FloatArray


def kendall_tau(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Kendall's tau-b (tie-corrected); NaN when either side is constant or has < 2 items."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size < 2:
        return float("nan")
    iu = np.triu_indices(a.size, k=1)
    da = np.sign(a[:, None] - a[None, :])[iu]
    db = np.sign(b[:, None] - b[None, :])[iu]
    s = float(np.sum(da * db))
    n_a = float(np.sum(da != 0))
    n_b = float(np.sum(db != 0))
    if n_a == 0 or n_b == 0:
        return float("nan")
    return s / float(np.sqrt(n_a * n_b))


def spearman_rho(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Spearman's rho: Pearson correlation of average ranks; NaN when a side is constant."""
    a, b = pd.Series(np.asarray(x, dtype=np.float64)), pd.Series(np.asarray(y, dtype=np.float64))
    return float(a.rank().corr(b.rank())) if a.size >= 2 else float("nan")


def tau_ap(
    reference: npt.ArrayLike, estimate: npt.ArrayLike, names: list[str] | None = None
) -> float:
    """tau_AP of the estimated ranking against the reference one (see the module docstring)."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    n = ref.size
    if n < 2:
        return float("nan")
    labels = names if names is not None else [f"{i:09d}" for i in range(n)]
    order = sorted(range(n), key=lambda i: (-est[i], labels[i]))
    ranked = ref[order]
    total = 0.0
    for i in range(1, n):
        above = ranked[:i]
        correct = float(np.sum(above > ranked[i]) + 0.5 * np.sum(above == ranked[i]))
        total += correct / i
    return 2.0 / (n - 1) * total - 1.0


def _ranks(scores: Mapping[str, float]) -> dict[str, int]:
    order = sorted(scores, key=lambda name: (-scores[name], name))
    return {name: i + 1 for i, name in enumerate(order)}


def compare_systems(
    human: Mapping[str, float], llm: Mapping[str, float], *, top_swaps: int = 5
) -> dict[str, Any]:
    """Rank agreement of systems under human and LLM labels: tau, rho, tau_AP, `per_system`
    (rank_change > 0: the LLM promotes the run) and `largest_swaps`."""
    names = sorted(set(human) & set(llm))
    h = np.array([human[n] for n in names], dtype=np.float64)
    m = np.array([llm[n] for n in names], dtype=np.float64)
    hr = _ranks({n: human[n] for n in names})
    lr = _ranks({n: llm[n] for n in names})
    table = [
        {
            "run": n,
            "human": to_float(human[n]),
            "llm": to_float(llm[n]),
            "human_rank": hr[n],
            "llm_rank": lr[n],
            "rank_change": hr[n] - lr[n],
        }
        for n in sorted(names, key=lambda x: hr[x])
    ]
    moved = [n for n in names if hr[n] != lr[n]]
    moved.sort(key=lambda n: (-abs(hr[n] - lr[n]), hr[n]))
    by_run = {str(row["run"]): row for row in table}
    swaps = [by_run[n] for n in moved]
    return {
        "n_systems": len(names),
        "kendall_tau": to_float(kendall_tau(h, m)),
        "spearman_rho": to_float(spearman_rho(h, m)),
        "tau_ap": to_float(tau_ap(h, m, names)),
        "per_system": table,
        "largest_swaps": swaps[:top_swaps],
    }


def rank_agreement_intervals(
    human: npt.ArrayLike,
    llm: npt.ArrayLike,
    names: list[str],
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, list[float | None]]:
    """Percentile intervals of tau, rho and tau_AP from `human` and `llm` [queries, systems]
    scores, resampling queries (seeded)."""
    h = np.asarray(human, dtype=np.float64)
    m = np.asarray(llm, dtype=np.float64)
    if h.shape[0] == 0 or n_resamples <= 0 or h.shape[1] < 2:
        return {}
    means = resampled_confusions(np.stack([h, m], axis=1), n_resamples, seed) / h.shape[0]
    figures: dict[str, Callable[[FloatArray, FloatArray], float]] = {
        "kendall_tau": kendall_tau,
        "spearman_rho": spearman_rho,
        "tau_ap": partial(tau_ap, names=names),
    }
    return {
        key: percentile_interval(np.array([figure(hb, mb) for hb, mb in means]))
        for key, figure in figures.items()
    }
