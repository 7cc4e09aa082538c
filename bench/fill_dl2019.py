"""Filling the holes of TREC DL 2019: the worked example of docs/filling-holes.md.

40% of the human qrels are removed at random (seeded); the removed pairs are refilled from one
of the shared LLM label sets (Llama-3-70B, 4 prompts); 1,000 of the remaining judged pairs are
"also judged" (the LLM's grade kept beside people's). Six runs built over the judged pool
(tests/helpers/fill_data.py: DL 2019 ships no runs) are scored under the three regimes and against
the full qrels. Prints the tables in Markdown, draws docs/filling-holes.png, and with --coverage N
counts over N seeds how often the filled interval covers the full-qrels score.

    python bench/fill_dl2019.py [--seed 0] [--also 1000] [--coverage 50] [--no-plot]
        [--coverage-measure M ...] [--stratify]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import kendalltau

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.spotcheck.also_judged import draw_also_judged  # noqa: E402
from grader.evaluation.fill.scores import REGIMES, FillResult, evaluate_fill  # noqa: E402
from grader.metrics.evaluate import evaluate  # noqa: E402
from tests.helpers import fill_data as fd  # noqa: E402

MEASURES = ["nDCG@10", "P(rel=2)@10"]
PLOT = ROOT / "docs" / "filling-holes.png"


def holed_world(
    seed: int, also: int, stratify: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, dict[tuple[str, str], float]]:
    """People's remaining qrels, the LLM's grades (holes and also-judged), 1/pi per drawn pair."""
    full, labels = fd.human_qrels(), fd.label_set()
    holed = fd.drop_share(full, 0.4, seed)
    pool = list(zip(holed.kept["query_id"], holed.kept["doc_id"], strict=True))
    grades = dict(zip(pool, holed.kept["grade"].tolist(), strict=True))
    draw = draw_also_judged(pool, grades, n=also, seed=seed, stratify=stratify)
    drawn = {f"{p.query_id} {p.doc_id}" for p in draw.pairs}
    removed = set(holed.removed["query_id"] + " " + holed.removed["doc_id"])
    key = labels["query_id"] + " " + labels["doc_id"]
    weights = {(p.query_id, p.doc_id): 1 / p.inclusion_probability for p in draw.pairs}
    return holed.kept, labels[key.isin(removed | drawn)], weights


def full_scores(runs: dict[str, pd.DataFrame], measures: list[str]) -> dict[tuple[str, str], float]:
    full = fd.human_qrels()
    out = {}
    for name, run in runs.items():
        means = evaluate(full, run, measures).groupby("measure", sort=False)["value"].mean()
        out.update({(name, str(m)): float(v) for m, v in means.items()})
    return out


def table(result: FillResult, truth: dict[tuple[str, str], float], measure: str) -> str:
    head = "| run | full qrels | holes non-relevant | judged only | filled | "
    head += "corrected [95% interval] |"
    lines = [head, "|---|---:|---:|---:|---:|---|"]
    for run, regimes in result.scores.items():
        values = [dict(regimes[r].means())[measure] for r in REGIMES]
        iv = result.intervals[run][measure]
        cells = " | ".join(f"{v:.3f}" for v in values)
        interval = f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
        lines.append(f"| {run} | {truth[run, measure]:.3f} | {cells} | {interval} |")
    return "\n".join(lines)


def shares_table(result: FillResult) -> str:
    lines = ["| run | people | LLM | unjudged |", "|---|---:|---:|---:|"]
    for run, s in result.shares.items():
        lines.append(
            f"| {run} | {s.share('human'):.1%} | {s.share('llm'):.1%} | {s.share('unjudged'):.1%} |"
        )
    return "\n".join(lines)


def taus(result: FillResult, truth: dict[tuple[str, str], float], measure: str) -> str:
    runs = list(result.scores)
    full = [truth[r, measure] for r in runs]
    parts = []
    for regime in REGIMES:
        values = [dict(result.scores[r][regime].means())[measure] for r in runs]
        parts.append(f"{regime} {kendalltau(full, values).statistic:.3f}")
    corrected = [result.intervals[r][measure].estimate for r in runs]
    parts.append(f"corrected {kendalltau(full, corrected).statistic:.3f}")
    return f"Kendall's tau with the full-qrels ranking of the runs ({measure}): " + ", ".join(parts)


def plot(result: FillResult, truth: dict[tuple[str, str], float], path: Path) -> None:
    fig = Figure(figsize=(10, 4.6))
    runs = list(result.scores)
    x = np.arange(len(runs))
    colours = {"holes_nonrelevant": "#C44E52", "judged_only": "#8172B2", "filled": "#DD8452"}
    for i, measure in enumerate(MEASURES):
        ax = fig.add_subplot(1, 2, i + 1)
        for j, regime in enumerate(REGIMES):
            values = [dict(result.scores[r][regime].means())[measure] for r in runs]
            ax.scatter(x + (j - 1.5) * 0.14, values, color=colours[regime], label=regime, s=22)
        est = np.array([result.intervals[r][measure].estimate for r in runs])
        low = np.array([result.intervals[r][measure].low for r in runs])
        high = np.array([result.intervals[r][measure].high for r in runs])
        ax.errorbar(
            x + 0.21,
            est,
            yerr=[est - low, high - est],
            fmt="o",
            color="#55A868",
            ms=4,
            capsize=3,
            label="filled, corrected (95%)",
        )
        ax.scatter(
            x,
            [truth[r, measure] for r in runs],
            marker="_",
            s=500,
            color="black",
            label="full qrels",
        )
        ax.set_xticks(x, runs, rotation=30, ha="right")
        ax.set_title(measure)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.suptitle("TREC DL 2019, 40% of the qrels removed and refilled by an LLM label set")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110, metadata={"Software": None})


def coverage(
    runs: dict[str, pd.DataFrame], measures: list[str], seeds: int, also: int, stratify: bool
) -> str:
    truth = full_scores(runs, measures)
    covered = dict.fromkeys(truth, 0)
    widths: list[float] = []
    refused = 0
    for seed in range(seeds):
        kept, llm, weights = holed_world(seed, also, stratify)
        result = evaluate_fill(kept, llm, runs, measures, weights=weights, seed=seed, check=False)
        for (run, measure), value in truth.items():
            iv = result.intervals[run][measure]
            covered[run, measure] += iv.low <= value <= iv.high
            widths.append(iv.high - iv.low)
            refused += measure in result.refused.get(run, {})
    lines = [
        f"coverage over {seeds} seeds, {also} pairs also judged"
        f"{' (stratified by human grade)' if stratify else ''} "
        f"(median width {np.median(widths):.3f}; {refused} of {len(widths)} intervals refused, "
        "counted here as given):"
    ]
    for measure in (str(m) for m in dict.fromkeys(m for _, m in truth)):
        cells = ", ".join(f"{run} {covered[run, measure]}/{seeds}" for run in runs)
        lines.append(f"  {measure}: {cells}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--also", type=int, default=1000)
    parser.add_argument("--coverage", type=int, default=0, metavar="SEEDS")
    parser.add_argument("--plot", type=Path, default=PLOT, help=f"where the plot goes ({PLOT})")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--coverage-measure", action="append", metavar="M", help=f"(default {MEASURES})"
    )
    parser.add_argument("--stratify", action="store_true", help="coverage: stratified draws")
    args = parser.parse_args()
    runs = fd.dl2019_runs()
    truth = full_scores(runs, MEASURES)
    kept, llm, weights = holed_world(args.seed, args.also)
    result = evaluate_fill(kept, llm, runs, MEASURES, weights=weights, seed=args.seed)
    print(
        f"human pairs kept {len(kept):,}, LLM-filled holes {result.holes:,}, "
        f"also judged {result.overlap:,}\n"
    )
    for measure in MEASURES:
        print(
            f"### {measure}\n\n{table(result, truth, measure)}\n\n{taus(result, truth, measure)}\n"
        )
    print(f"### who graded each run's top 10\n\n{shares_table(result)}\n")
    if not args.no_plot:
        plot(result, truth, args.plot)
        print(f"plot written to {args.plot}")
    if args.coverage:
        measures = args.coverage_measure or MEASURES
        print(coverage(runs, measures, args.coverage, args.also, args.stratify))


if __name__ == "__main__":
    main()
