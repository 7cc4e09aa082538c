"""Active against uniform sampling with a real model's logprobs as the judge.

TREC DL 2019 stratified pairs (bench/real_quality.py's, --pairs N) are graded with logprobs by a
real model on llama.cpp's server (`relgrade grade`, a prompt that asks for them, --prompt; the
store in --work keeps every answer, so a rerun or a larger --pairs asks only for what is
missing; pairs in --judgments, graded already with the same prompt, are not asked again; --pairs 0
reads --judgments alone). The judgments' grade distributions are
the judge: the uncertainty `relgrade sample --strategy active` weighs (calibration's
`estimand_uncertainty`: P(the other side of grade 2)), its successive-sampling design at each
uniform share (--shares), and the fixed-n interval of the share relevant (people's grade >= 2)
at n = --n against uniform sampling at the same n, as bench/active_sampling.py measures it on
simulated judges: uniform PPI++ (`ppi_mean`) and the same sequence with equal weights.

    nice -n 5 python bench/real_active.py --pairs 96 --n 24 [--judgments FILE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

from active_sampling import auc
from real_cost import run_file
from real_models import MODELS, fetch
from real_quality import DATA, ROOT, LlamaServer
from real_quality_data import _qrels as qrels
from real_quality_data import load_pairs

from calibration.spotcheck.sequential import (
    UNIFORM_SHARE,
    active_weights,
    estimand_uncertainty,
    sequential_draw,
)
from calibration.stats.confseq import share_sequence
from calibration.stats.ppi import ppi_mean
from grader.cli.main import main as relgrade
from grader.io.judgments import read_judgments
from grader.models import Judgment

Arr = npt.NDArray[np.float64]
THRESHOLD = 2


def grade(args: Any, known: list[Judgment]) -> list[Judgment]:
    """The pairs not in `known` graded with logprobs (a server started unless --base-url)."""
    pairs = load_pairs(args.data, args.pairs, args.seed, args.work)
    seen = {(j.query_id, j.doc_id) for j in known}
    todo = [p for p in pairs.order if p not in seen]
    out = args.work / f"{args.model}.{args.prompt}.logprobs.jsonl"
    server, url = None, args.base_url
    if url is None and todo:
        path = fetch(MODELS[args.model], args.models_cache)
        server = LlamaServer(args.llama_python, path, args.model, args.work / "server.log", 2048)
        url = server.url
    try:
        for k in range(args.chunk, len(todo) + args.chunk, args.chunk):
            run = run_file(todo[:k], args.work / "run.txt")
            argv = ["grade", "--queries", str(pairs.queries), "--docs", str(pairs.docs)]
            argv += ["--run", str(run), "--depth", "100000", "--prompt", args.prompt]
            argv += ["--base-url", str(url), "--model", args.model, "--timeout", "900"]
            argv += ["--output-mode", "json_object_schema", "--max-context", "2048"]
            argv += ["--concurrency", "1", "--quiet", "--store", str(args.work / "store.db")]
            if relgrade([*argv, "--out", str(out)]) not in (0, 1):
                raise SystemExit(f"relgrade grade stopped ({args.model}, {args.prompt})")
            print(f"  real_active: {min(k, len(todo))}/{len(todo)} graded", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    return known + (list(read_judgments(out)) if todo else [])


def half_widths(y: Arr, f: Arr, w: Arr, n: int, paths: int, seed: int) -> Arr:
    """Half-widths of the fixed-n interval after n draws of the design with weights w."""
    rng = np.random.default_rng(seed)
    factor = float(np.mean(w) * np.mean(1 / w))
    out = []
    for _ in range(paths):
        order, p = sequential_draw(w, n, rng)
        seq = share_sequence(y[order], f[order], p, f, factor)
        out.append((seq.fixed_ci[1] - seq.fixed_ci[0]) / 2)
    return np.array(out)


def uniform_ppi(y: Arr, f: Arr, n: int, paths: int, seed: int) -> Arr:
    """Half-widths of uniform PPI++ over `paths` samples of n pairs."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(paths):
        s = np.zeros(y.size, dtype=bool)
        s[rng.choice(y.size, n, replace=False)] = True
        out.append(ppi_mean(y[s], f[s], f[~s]).width / 2)
    return np.array(out)


def p_relevant(j: Judgment) -> float:
    """P(grade >= THRESHOLD) from the judgment's distribution, else its grade's 0/1."""
    if j.distribution is None:
        return float(int(j.grade or 0) >= THRESHOLD)
    return float(sum(j.distribution[THRESHOLD:]))


def report(judged: list[Judgment], human: dict[tuple[str, str], int], args: Any) -> None:
    """The judge's sharpness, then each design's mean half-width and its ratio to uniform, with
    the LLM's 0/1 relevance and with P(relevant) (what relgrade uses given a distribution)."""
    pop = [j for j in judged if j.grade is not None and (j.query_id, j.doc_id) in human]
    with_dist = sum(j.distribution is not None for j in pop)
    y = np.array([human[(j.query_id, j.doc_id)] >= THRESHOLD for j in pop], dtype=np.float64)
    r = np.array([p_relevant(j) for j in pop])
    q, source, fallback = estimand_uncertainty(pop, THRESHOLD)
    n = args.n or len(pop) // 4
    print(
        f"real_active: {len(pop)} pairs with a grade and a human grade, {with_dist} with a grade "
        f"distribution; uncertainty from {source} ({fallback} fell back); q quartiles "
        f"{np.percentile(q, [25, 50, 75]).round(3).tolist()}; share relevant {y.mean():.3f}; "
        f"P(rel) AUC against people {auc(y, r):.3f}; n = {n}, {args.paths} paths"
    )
    best = float(np.mean(np.sqrt(q)) / np.sqrt(np.mean(q)))
    print(f"best any design could do with q (E sqrt q / sqrt E q): {best:.3f}")
    relevant = np.array([int(j.grade or 0) >= THRESHOLD for j in pop], dtype=np.float64)
    for label, f in (("0/1", relevant), ("P(rel)", r)):
        ppi = uniform_ppi(y, f, n, args.paths, 1).mean()
        even = half_widths(y, f, np.ones(y.size), n, args.paths, 2).mean()
        print(
            f"prediction {label}: uniform PPI++ half-width {ppi:.4f}; the sequence with equal "
            f"weights {even:.4f}"
        )
        for share in args.shares:
            act = half_widths(y, f, active_weights(q, share), n, args.paths, 3).mean()
            tag = " (the default)" if share == UNIFORM_SHARE else ""
            print(
                f"  active, uniform share {share}{tag}: half-width {act:.4f}; active / uniform "
                f"{act / ppi:.3f} (PPI++), {act / even:.3f} (equal weights)"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=96, help="pairs, N/4 per grade (96; 0: none)")
    parser.add_argument("--n", type=int, help="sample size (a quarter of the pairs)")
    parser.add_argument("--paths", type=int, default=2000)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.5, 0.3, 0.7])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(MODELS))
    parser.add_argument("--prompt", default="passage-v1")
    parser.add_argument("--judgments", type=Path, nargs="+", help="graded already (not asked)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--base-url", help="a server already running (its model --model)")
    parser.add_argument("--work", type=Path, default=ROOT / ".venv-llama" / "real-active")
    parser.add_argument("--models-cache", type=Path, default=ROOT / ".venv-llama" / "models")
    parser.add_argument("--llama-python", type=Path, default=ROOT / ".venv-llama/bin/python")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    known = [j for path in args.judgments or [] for j in read_judgments(path)]
    graded = grade(args, known) if args.pairs else known
    judged = list({(j.query_id, j.doc_id): j for j in graded}.values())  # one per pair
    human = {(q, d): g for q, d, g in qrels(args.data / "2019qrels-pass.txt")}
    report(judged, human, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
