"""Coverage of `calibrate`'s design-based intervals on TREC DL 2019, by simulation.

People: the NIST grades; LLM: each of the five shared label sets in turn. The population is the
pairs of the first queries (by id) up to --population pairs (4,423 by default, a collection the
size of the issue's). Each world draws a sample as `relgrade sample` does and runs the library's
own estimators (`calibration.estimates_section.relevant_share` and `mean_grade`) on the grades
people would have given; the truth is the population's share of relevant pairs (NIST grade >= 2)
and its mean NIST grade.

Part `partial`: a uniform sample of --sampled pairs (2,000) graded only in part, the first n in
its order (n = 100, 200, 300). `prefix` is the library's interval (the graded prefix, pi = n / N);
`manifest pi` is what it was before (the manifest's pi = L / N for the n graded pairs).

Part `mean`: `estimates.mean_grade` from complete samples of n = 100, 300, 1,000 pairs, uniform
and stratified by LLM grade (equal allocation): coverage of the mean NIST grade, and of the
pool's mean bias (mean LLM grade minus mean NIST grade, over the population) by its
design-based interval (`mean_bias_ci`) and by the agreement table's query bootstrap
(`intervals.mean_bias`, 200 resamples here), with their mean widths.

Part `sequence`: uniform paths over all 9,260 pairs graded one at a time: the confidence
sequence's half-width over the fixed-n PPI++ interval's at n = 100, 300, 1,000, and how
`more_for_0_05`, forecast after 100 and 300 grades, compares with the grades each path needed.

    python bench/calibrate_coverage.py [--worlds 200] [--paths 200]
                                       [--part partial mean sequence] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.estimates_section import mean_grade, relevant_share  # noqa: E402
from calibration.join import PairedGrades  # noqa: E402
from calibration.spotcheck.sequential import uniform_draw_probabilities  # noqa: E402
from calibration.spotcheck.stopping import DrawOrder  # noqa: E402
from calibration.stats.agreement import agreement_intervals  # noqa: E402
from calibration.stats.confseq import (  # noqa: E402
    TARGET,
    boundary,
    desraj_terms,
    more_for,
    running,
    share_sequence,
)
from calibration.stats.ppi import SampleDesign, ppi_mean  # noqa: E402
from grader.metrics.kappa import grouped_confusion  # noqa: E402
from tests.helpers.spotcheck_sim import LABEL_SETS, LabelSets, load_label_sets  # noqa: E402

Arr = npt.NDArray[np.float64]
THRESHOLD = 2


def population(sets: LabelSets, size: int) -> npt.NDArray[np.int64]:
    """Indices of the pairs of the first queries (by id) until `size` pairs are reached."""
    order = np.argsort(np.array(sets.query_ids), kind="stable")
    qids = np.array(sets.query_ids)[order]
    firsts = list(dict.fromkeys(qids.tolist()))
    keep: list[int] = []
    for q in firsts:
        keep.extend(order[qids == q].tolist())
        if len(keep) >= size:
            break
    return np.array(keep, dtype=np.int64)


_IDS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def paired_of(
    sets: LabelSets, pop: npt.NDArray[np.int64], graded: npt.NDArray[np.int64], llm: np.ndarray
) -> PairedGrades:
    """The PairedGrades calibrate builds when people graded the population rows `graded`."""
    if id(pop) not in _IDS:
        _IDS[id(pop)] = (np.array(sets.query_ids)[pop], np.array(sets.doc_ids)[pop])
    q, d = _IDS[id(pop)]
    frame = pd.DataFrame(
        {
            "query_id": q[graded],
            "doc_id": d[graded],
            "human": sets.human[pop][graded],
            "llm": llm[pop][graded],
        }
    )
    everything = pd.DataFrame({"query_id": q, "doc_id": d, "grade": llm[pop]})
    return PairedGrades(frame, everything, everything, len(pop) - len(graded), 0)


def covers(ci: list[float | None] | None, truth: float) -> tuple[bool, float]:
    if not ci or ci[0] is None or ci[1] is None:
        return False, float("nan")
    return bool(ci[0] <= truth <= ci[1]), float(ci[1] - ci[0])


def part_partial(sets: LabelSets, pop: npt.NDArray[np.int64], args: argparse.Namespace) -> None:
    n_pop, big = len(pop), args.sampled
    truth = float(np.mean(sets.human[pop] >= THRESHOLD))
    mean_truth = float(np.mean(sets.human[pop]))
    design = SampleDesign("pairs", "manifest", "uniform", big)
    rng = np.random.default_rng(args.seed)
    print(
        f"\npartial: uniform sample of {big} of N = {n_pop} pairs, the first n graded; "
        f"{args.worlds} worlds x {len(LABEL_SETS)} label sets; truth share {truth:.4f}, "
        f"mean grade {mean_truth:.4f}"
    )
    print(
        f"{'n':>5} {'share: prefix':>14} {'worst set':>10} {'manifest pi':>12} "
        f"{'width ratio':>12} {'mean grade: prefix':>19}"
    )
    q = np.array(sets.query_ids)[pop]
    d = np.array(sets.doc_ids)[pop]
    for n in args.graded:
        hits: dict[str, list[float]] = {"prefix": [], "old": [], "grade": [], "ratio": []}
        per_set: dict[str, list[bool]] = {name: [] for name in LABEL_SETS}
        for _ in range(args.worlds):
            sample = rng.permutation(n_pop)[:big]
            order = DrawOrder(
                pairs=list(zip(q[sample].tolist(), d[sample].tolist(), strict=True)),
                p=uniform_draw_probabilities(big, n_pop),
                population=n_pop,
            )
            graded = sample[:n]
            for name in LABEL_SETS:
                llm = sets.llm[name]
                paired = paired_of(sets, pop, graded, llm)
                w = np.full(n, n_pop / big)
                est = relevant_share(paired, design, w, THRESHOLD, order=order)
                ok, width = covers(est.ppi_ci, truth)
                hits["prefix"].append(ok)
                per_set[name].append(ok)
                only = np.ones(n_pop, dtype=bool)
                only[graded] = False
                f = (llm[pop] >= THRESHOLD).astype(np.float64)
                y = (sets.human[pop][graded] >= THRESHOLD).astype(np.float64)
                old = ppi_mean(y, f[graded], f[only], weights=w, bounds=(0.0, 1.0))
                old_ok, old_width = covers(list(old.ppi_ci), truth)
                hits["old"].append(old_ok)
                hits["ratio"].append(width / old_width)
                grade = mean_grade(paired, design, w, order=order)
                hits["grade"].append(covers(grade.ppi_ci, mean_truth)[0])
        worst = min(float(np.mean(v)) for v in per_set.values())
        print(
            f"{n:>5} {np.mean(hits['prefix']):>14.1%} {worst:>10.1%} "
            f"{np.mean(hits['old']):>12.1%} {np.mean(hits['ratio']):>12.3f} "
            f"{np.mean(hits['grade']):>19.1%}"
        )


def stratified_sample(
    llm: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], Arr]:
    """A stratified sample by LLM grade, equal allocation (capped), and each row's 1/pi."""
    grades = np.unique(llm)
    sizes = np.array([np.sum(llm == g) for g in grades])
    take = np.minimum(sizes, n // len(grades))
    rest = n - take.sum()
    while rest > 0:
        room = sizes > take
        take[np.flatnonzero(room)[:rest]] += 1
        rest = n - take.sum()
    rows, weights = [], []
    for g, size, k in zip(grades, sizes, take, strict=True):
        chosen = rng.choice(np.flatnonzero(llm == g), size=k, replace=False)
        rows.extend(chosen.tolist())
        weights.extend([size / k] * k)
    return np.array(rows, dtype=np.int64), np.array(weights)


def part_mean(sets: LabelSets, pop: npt.NDArray[np.int64], args: argparse.Namespace) -> None:
    n_pop = len(pop)
    mean_truth = float(np.mean(sets.human[pop]))
    rng = np.random.default_rng(args.seed + 1)
    print(
        f"\nmean: complete samples of N = {n_pop} pairs; {args.worlds} worlds x "
        f"{len(LABEL_SETS)} label sets (query bootstrap: the first {args.boot_worlds} worlds, "
        "200 resamples)"
    )
    print(
        f"{'design':>10} {'n':>5} {'mean grade':>11} {'worst set':>10} {'bias: design':>13} "
        f"{'width':>7} {'bias: query boot':>17} {'width':>7}"
    )
    for strategy in ("uniform", "stratified"):
        design = SampleDesign("pairs", "manifest", strategy, None)
        for n in args.complete:
            cov, bias_cov, widths, boot_cov, boot_widths = [], [], [], [], []
            per_set: dict[str, list[bool]] = {name: [] for name in LABEL_SETS}
            for world in range(args.worlds):
                for name in LABEL_SETS:
                    llm = sets.llm[name][pop]
                    if strategy == "uniform":
                        rows, w = rng.permutation(n_pop)[:n], np.full(n, n_pop / n)
                    else:
                        rows, w = stratified_sample(llm, n, rng)
                    paired = paired_of(sets, pop, rows, sets.llm[name])
                    est = mean_grade(paired, design, w)
                    ok = covers(est.ppi_ci, mean_truth)[0]
                    cov.append(ok)
                    per_set[name].append(ok)
                    bias_truth = float(llm.mean()) - mean_truth
                    b_ok, b_width = covers(est.mean_bias_ci, bias_truth)
                    bias_cov.append(b_ok)
                    widths.append(b_width)
                    if world < args.boot_worlds:
                        _, codes = paired.query_index()
                        mats = grouped_confusion(
                            codes,
                            int(codes.max()) + 1,
                            paired.frame["human"],
                            paired.frame["llm"],
                            4,
                            w,
                        )
                        ci = agreement_intervals(mats, 200, world)["mean_bias"]
                        q_ok, q_width = covers(ci, bias_truth)
                        boot_cov.append(q_ok)
                        boot_widths.append(q_width)
            worst = min(float(np.mean(v)) for v in per_set.values())
            print(
                f"{strategy:>10} {n:>5} {np.mean(cov):>11.1%} {worst:>10.1%} "
                f"{np.mean(bias_cov):>13.1%} {np.mean(widths):>7.3f} "
                f"{np.mean(boot_cov):>17.1%} {np.mean(boot_widths):>7.3f}"
            )


def part_sequence(sets: LabelSets, args: argparse.Namespace) -> None:
    """Uniform paths over all the pairs: the sequence's half-width against the fixed-n PPI++
    interval's at n = 100, 300, 1,000, and `more_for_0_05` (forecast at n = 100 and 300) against
    the grades each path actually needed to reach a half-width of 0.05."""
    n_pop, t_max = sets.human.size, args.path_length
    y_all = (sets.human >= THRESHOLD).astype(np.float64)
    rng = np.random.default_rng(args.seed + 2)
    p = uniform_draw_probabilities(t_max, n_pop)
    print(
        f"\nsequence: uniform paths over all N = {n_pop} pairs, {args.paths} paths x "
        f"{len(LABEL_SETS)} label sets, graded up to n = {t_max}"
    )
    print(f"{'':>44} {'cs / fixed at n =':^22} {'forecast / needed from':^28}")
    print(f"{'label set':>44} {'100':>8} {'300':>6} {'1000':>6} {'100':>13} {'300':>13}")
    for name in LABEL_SETS:
        f_all = (sets.llm[name] >= THRESHOLD).astype(np.float64)
        order = np.argsort(rng.random((args.paths, n_pop)), axis=1)[:, :t_max]
        y, f = y_all[order], f_all[order]
        z = desraj_terms(y, f, np.broadcast_to(p, y.shape), float(f_all.sum()), n_pop)
        _, sd = running(z)
        half = sd * boundary(np.arange(1, t_max + 1))
        ratios: dict[int, list[float]] = {t: [] for t in (100, 300, 1000)}
        forecast: dict[int, list[float]] = {t: [] for t in (100, 300)}
        before: dict[int, list[float]] = {t: [] for t in (100, 300)}
        for k in range(args.paths):
            for t in ratios:
                rest = np.ones(n_pop, dtype=bool)
                rest[order[k, :t]] = False
                fixed = ppi_mean(y[k, :t], f[k, :t], f_all[rest])
                ratios[t].append(float(half[k, t - 1]) / (fixed.width / 2))
            reached = np.flatnonzero(half[k] <= TARGET)
            for t in forecast:
                later = reached[reached >= t - 1]
                if not later.size:
                    continue
                seq = share_sequence(y[k, :t], f[k, :t], p[:t], f_all)
                needed = int(later[0]) + 1 - t
                if needed > 0:
                    forecast[t].append(seq.more_for(TARGET) / needed)
                    before[t].append(more_for(TARGET, t, seq.sd) / needed)
        cells = [f"{np.mean(ratios[t]):.3f}" for t in ratios]
        cells += [f"{np.median(forecast[t]):.2f} ({np.median(before[t]):.2f})" for t in forecast]
        short = name.removeprefix("dl2019_")
        print(
            f"{short:>44} {cells[0]:>8} {cells[1]:>6} {cells[2]:>6} {cells[3]:>13} {cells[4]:>13}"
        )
    print(
        "(cs / fixed: mean ratio of half-widths; forecast / needed: the median over paths of "
        "more_for_0_05 over the grades the path needed; in brackets the forecast on the "
        "current spread, before it projected the spread's shrinking)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=200, help="draws per label set (200)")
    parser.add_argument(
        "--part",
        nargs="+",
        default=["partial", "mean", "sequence"],
        choices=["partial", "mean", "sequence"],
    )
    parser.add_argument("--paths", type=int, default=200, help="sequence paths per label set")
    parser.add_argument("--path-length", type=int, default=2000)
    parser.add_argument("--population", type=int, default=4423)
    parser.add_argument("--sampled", type=int, default=2000, help="the partial sample's size")
    parser.add_argument("--graded", type=int, nargs="+", default=[100, 200, 300])
    parser.add_argument("--complete", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--boot-worlds", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sets = load_label_sets()
    pop = population(sets, args.population)
    start = time.perf_counter()
    if "partial" in args.part:
        part_partial(sets, pop, args)
    if "mean" in args.part:
        part_mean(sets, pop, args)
    if "sequence" in args.part:
        part_sequence(sets, args)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
