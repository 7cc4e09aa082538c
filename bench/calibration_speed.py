"""Calibration speed: every agreement figure from one confusion matrix vs the reference libraries.

On the five TREC DL 2019 LLM label sets (9,260 pairs each; skipped when the data is absent) and on a
synthetic set of 200,000 pairs over 10,000 queries, times in this one process:

- relgrade: `calibration.stats.agreement.agreement` (kappa x3, alpha x2, binary kappas x3,
  confusion, per-grade precision/recall, bias) and the query bootstrap of all figures (1,000
  resamples);
- the peers: scikit-learn's `cohen_kappa_score` (three weightings, three binary splits) plus the
  krippendorff package's `alpha` (ordinal and interval): the same figures, one call each.

A bootstrap through the peers would call them 8 x 1,000 times; the script times 20 resamples of that
and scales it, and says so. Before timing it checks both sides agree to 1e-9.

python bench/calibration_speed.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import krippendorff
import numpy as np
from sklearn.metrics import cohen_kappa_score

from calibration.stats.agreement import agreement, agreement_intervals
from grader.metrics.kappa import grouped_confusion

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl-2019"


def peer_figures(h: np.ndarray, m: np.ndarray) -> dict[str, float]:
    labels = [0, 1, 2, 3]
    out = {
        "cohen_kappa": cohen_kappa_score(h, m, labels=labels),
        "weighted_kappa_linear": cohen_kappa_score(h, m, weights="linear", labels=labels),
        "weighted_kappa_quadratic": cohen_kappa_score(h, m, weights="quadratic", labels=labels),
    }
    for level in ("ordinal", "interval"):
        data = np.vstack([h, m])
        out[f"krippendorff_alpha_{level}"] = krippendorff.alpha(data, level_of_measurement=level)
    for t in (1, 2, 3):
        out[f"binary_{t}"] = cohen_kappa_score(h >= t, m >= t)
    return out


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def compare(name: str, q: np.ndarray, h: np.ndarray, m: np.ndarray) -> None:
    ours = agreement(h, m)
    peer = peer_figures(h, m)
    for key in ("cohen_kappa", "weighted_kappa_quadratic", "krippendorff_alpha_ordinal"):
        assert abs(ours[key] - peer[key]) < 1e-9, (key, ours[key], peer[key])
    assert abs(ours["binary_kappa"]["2"] - peer["binary_2"]) < 1e-9
    t_ours = best_of(lambda: agreement(h, m))
    t_peer = best_of(lambda: peer_figures(h, m), repeat=3)
    codes, uniques = np.unique(q, return_inverse=True)
    per_query = grouped_confusion(uniques, len(codes), h, m, 4)
    t_boot = best_of(lambda: agreement_intervals(per_query, 1000, 0), repeat=3)
    rng = np.random.default_rng(0)
    groups = [np.flatnonzero(uniques == i) for i in range(len(codes))]

    def peer_boot(n: int) -> None:
        for _ in range(n):
            pick = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
            peer_figures(h[pick], m[pick])

    t_peer_boot = best_of(lambda: peer_boot(20), repeat=1) * 1000 / 20
    print(
        f"{name:<58} n={len(h):>7}  figures {t_ours * 1e3:7.2f} ms vs peers "
        f"{t_peer * 1e3:8.2f} ms (ratio {t_ours / t_peer:.3f}); bootstrap x1000 "
        f"{t_boot:6.2f} s vs ~{t_peer_boot:7.1f} s (ratio {t_boot / t_peer_boot:.4f})"
    )


def read_qrels(path: Path) -> dict[tuple[str, str], int]:
    out = {}
    for line in path.read_text().splitlines():
        qid, _, doc, grade = line.split()
        out[(qid, doc)] = int(grade)
    return out


def main() -> None:
    if DATA.exists():
        human = read_qrels(DATA / "2019qrels-pass.txt")
        for path in sorted((DATA / "llm-labels").glob("*.txt")):
            llm = read_qrels(path)
            keys = sorted(human.keys() & llm.keys())
            q = np.array([k[0] for k in keys])
            compare(
                path.stem,
                q,
                np.array([human[k] for k in keys]),
                np.array([llm[k] for k in keys]),
            )
    else:
        print(f"{DATA} absent: TREC DL 2019 rows skipped")
    rng = np.random.default_rng(1)
    n_q, per = 10_000, 20
    q = np.repeat(np.arange(n_q), per).astype(str)
    h = rng.integers(0, 4, n_q * per)
    m = np.clip(h + rng.integers(-1, 2, h.size), 0, 3)
    compare("synthetic 10,000 queries x 20 pairs", q, h, m)


if __name__ == "__main__":
    main()
