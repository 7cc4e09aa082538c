"""Cost per judgment of relgrade against a naive client, on a real llama.cpp server.

The same TREC DL 2019 stratified pairs as bench/real_quality.py (--pairs N, N/4 per human
grade, seed --seed) are graded by each arm (--arms) on the same server and model:

- `naive`: the openai SDK as a user would write it, one request per pair, passage-v1's
  instructions and scale (system message) and the pair (user message), a reason then a final
  `Grade: N` line, no logprobs, no grammar; a reply without that line is a failure, never a 0;
- `naive-pair-first`: the same words in one user message with the pair first, so nothing is
  shared from one request to the next (what the shared-prefix-first layout is worth);
- `default`: `relgrade grade` with its default prompt (passage-v1, logprobs on);
- `no-logprobs`: the same with `--no-logprobs`;
- `short`: `--prompt passage-short-v1 --no-logprobs` (grade only, a few output tokens);
- `short-logprobs`: `--prompt passage-short-v1` (logprobs on);
- `text`, `short-text`: passage-v1 or passage-short-v1, `--no-logprobs --output-mode text` (a
  `Grade: N` line, no grammar; the others use `json_object_schema`, llama.cpp's grammar).

Runs alternate: the pairs go by --chunk, and each chunk is graded by every arm in turn, the order
rotated from chunk to chunk, so the machine's load hits every arm alike. relgrade runs in this
process on a fresh store per arm (nothing cached from a past run or another arm). Printed per
arm: pairs graded, failures, kappa against people (relgrade's `calibrate`, checked with
scikit-learn), prompt tokens sent, prompt tokens the server evaluated (its log's prefix-match
hits taken off), completion tokens, seconds per judgment (wall clock, one request at a time),
each as a ratio to `naive`, and kappa minus naive's kappa with a paired bootstrap 95% interval
over pairs (the noise at this n).
Then the logprob cost: seconds per judgment with logprobs over without, same prompt and pairs.

    nice -n 5 python bench/real_cost.py --pairs 32 --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from real_cost_naive import ask, naive_messages
from real_models import MODELS, fetch
from real_quality import DATA, ROOT, LlamaServer
from real_quality_data import Pairs, load_pairs
from real_quality_stats import figures

from grader.cli.main import main as relgrade
from grader.io.judgments import read_judgments

Pair = tuple[str, str]
_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")
RELGRADE_ARMS = {  # arm -> (prompt, logprobs, output mode)
    "default": ("passage-v1", True, "json_object_schema"),
    "no-logprobs": ("passage-v1", False, "json_object_schema"),
    "short": ("passage-short-v1", False, "json_object_schema"),
    "short-logprobs": ("passage-short-v1", True, "json_object_schema"),
    "text": ("passage-v1", False, "text"),
    "short-text": ("passage-short-v1", False, "text"),
}
ARMS = ("naive", "naive-pair-first", *RELGRADE_ARMS)


@dataclass
class Tally:
    """What one arm gave and spent over the chunks."""

    grades: dict[Pair, int | None] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prefix_hits: int = 0
    seconds: float = 0.0
    causes: Counter[str] = field(default_factory=Counter)


class ServerLog:
    """The prefix-match hits llama-cpp-python's server logged since the last call."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.offset = path, path.stat().st_size if path and path.exists() else 0

    def hits(self) -> int:
        if self.path is None or not self.path.exists():
            return 0
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode("utf-8", "replace")
            self.offset = fh.tell()
        return sum(int(m.group(1)) for m in _HIT.finditer(text))


def _naive(arm: str, chunk: list[Pair], texts: dict[str, dict[str, str]], args: Any) -> Tally:
    import openai

    client = openai.OpenAI(base_url=args.url, api_key="none", timeout=900, max_retries=0)
    out = Tally()
    for qid, did in chunk:
        messages = naive_messages(
            texts["q"][qid], texts["d"][did], pair_first=arm == "naive-pair-first"
        )
        answer = ask(client, args.model, messages, max_tokens=300)
        out.grades[(qid, did)] = answer.grade
        out.prompt_tokens += answer.prompt_tokens
        out.completion_tokens += answer.completion_tokens
        if answer.error:
            out.causes["no grade line" if answer.prompt_tokens else "request failed"] += 1
    return out


def run_file(chunk: list[Pair], path: Path) -> Path:
    """A TREC run holding these pairs (each query's documents in the order given)."""
    ranks: Counter[str] = Counter()
    lines = []
    for qid, did in chunk:
        ranks[qid] += 1
        lines.append(f"{qid} Q0 {did} {ranks[qid]} {1000 - ranks[qid]} pairs\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _relgrade(arm: str, chunk: list[Pair], pairs: Pairs, step: int, args: Any) -> Tally:
    prompt, logprobs, mode = RELGRADE_ARMS[arm]
    run = run_file(chunk, args.work / f"run-{step}.txt")
    out_path = args.work / f"{arm}-{step}.jsonl"
    argv = ["grade", "--queries", str(pairs.queries), "--docs", str(pairs.docs)]
    argv += ["--run", str(run), "--depth", "100000", "--prompt", prompt]
    argv += ["--base-url", args.url, "--model", args.model, "--output-mode", mode]
    argv += ["--max-context", str(args.ctx), "--concurrency", "1", "--timeout", "900"]
    # A store per arm: the output mode is not part of a content key, so `short` and
    # `short-text` would otherwise answer each other's pairs from the store.
    store = args.work / f"store-{arm}.db"
    argv += ["--store", str(store), "--out", str(out_path), "--quiet"]
    code = relgrade(argv if logprobs else [*argv, "--no-logprobs"])
    if code not in (0, 1):
        raise SystemExit(f"relgrade grade stopped with exit status {code} ({arm})")
    out = Tally()
    for j in read_judgments(out_path):
        out.grades[(j.query_id, j.doc_id)] = None if j.grade is None else int(j.grade)
        out.prompt_tokens += j.usage.prompt_tokens
        out.completion_tokens += j.usage.completion_tokens
        if j.status != "ok":
            out.causes[j.error.type if j.error else "failed"] += 1
    return out


def _add(total: Tally, part: Tally) -> None:
    total.grades |= part.grades
    total.prompt_tokens += part.prompt_tokens
    total.completion_tokens += part.completion_tokens
    total.prefix_hits += part.prefix_hits
    total.seconds += part.seconds
    total.causes += part.causes


def run_arms(pairs: Pairs, texts: dict[str, dict[str, str]], args: Any) -> dict[str, Tally]:
    """Every arm over every chunk, the arms' order rotated from chunk to chunk."""
    arms = args.arms.split(",")
    tallies = {arm: Tally() for arm in arms}
    log = ServerLog(args.server_log)
    started = time.monotonic()
    for step, first in enumerate(range(0, len(pairs), args.chunk)):
        chunk = pairs.order[first : first + args.chunk]
        for arm in arms[step % len(arms) :] + arms[: step % len(arms)]:
            log.hits()  # skip what was logged before this arm's requests
            began = time.monotonic()
            part = (
                _naive(arm, chunk, texts, args)
                if arm.startswith("naive")
                else _relgrade(arm, chunk, pairs, step, args)
            )
            part.seconds = time.monotonic() - began
            part.prefix_hits = log.hits()
            _add(tallies[arm], part)
        done = first + len(chunk)
        took = time.monotonic() - started
        print(f"  real_cost: {done}/{len(pairs)} pairs, every arm ({took:.0f} s)", file=sys.stderr)
    return tallies


def kappa(h: np.ndarray, m: np.ndarray) -> float:
    """Cohen's unweighted kappa of two 0..3 grade arrays (nan when chance agreement is 1)."""
    table = np.zeros((4, 4))
    np.add.at(table, (h, m), 1)
    table /= table.sum()
    chance = float(table.sum(1) @ table.sum(0))
    return float("nan") if chance >= 1 else (float(np.trace(table)) - chance) / (1 - chance)


def kappa_gap(
    human: dict[Pair, int], arm: dict[Pair, int | None], naive: dict[Pair, int | None], seed: int
) -> tuple[float, float, float]:
    """kappa(arm) - kappa(naive) on the pairs both graded, with a paired bootstrap 95% interval."""
    both = [p for p in arm if arm[p] is not None and naive.get(p) is not None]
    h = np.array([human[p] for p in both])
    a = np.array([arm[p] for p in both])
    b = np.array([naive[p] for p in both])
    rng = np.random.default_rng(seed)
    gaps = []
    for _ in range(2000):
        i = rng.integers(0, len(both), len(both))
        gaps.append(kappa(h[i], a[i]) - kappa(h[i], b[i]))
    low, high = np.nanpercentile(gaps, [2.5, 97.5])
    return kappa(h, a) - kappa(h, b), float(low), float(high)


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:5.2f}x" if theirs else "    -"


def print_table(tallies: dict[str, Tally], pairs: Pairs, seed: int) -> None:
    """One row per arm: figures per judgment and their ratios to `naive`'s."""
    print(
        f"{'arm':<18} {'n':>4} {'fail':>4} {'kappa':>6} {'prompt':>6} {'eval':>5} {'compl':>6} "
        f"{'s/judg':>6} | {'tokens':>6} {'eval':>6} {'compl':>6} {'secs':>6} | kappa - naive [95%]"
    )
    base = tallies.get("naive")
    for arm, t in tallies.items():
        n = len(t.grades)
        graded = {p: g for p, g in t.grades.items() if g is not None}
        fig = figures(arm, graded, pairs.human)  # relgrade's calibrate, checked by scikit-learn
        per = np.array([t.prompt_tokens, t.prompt_tokens - t.prefix_hits, t.completion_tokens])
        per, secs = per / n, t.seconds / n
        row = f"{arm:<18} {n:>4} {n - len(graded):>4} {fig.kappa:6.3f} {per[0]:6.0f} "
        row += f"{per[1]:5.0f} {per[2]:6.1f} {secs:6.2f} |"
        if base is not None:
            bn = len(base.grades)
            bp = np.array([base.prompt_tokens, base.prompt_tokens - base.prefix_hits])
            bp, bc, bs = bp / bn, base.completion_tokens / bn, base.seconds / bn
            row += f" {_ratio(per[0] + per[2], bp[0] + bc)} {_ratio(per[1] + per[2], bp[1] + bc)}"
            row += f" {_ratio(per[2], bc)} {_ratio(secs, bs)} |"
            if arm != "naive":
                gap, low, high = kappa_gap(pairs.human, t.grades, base.grades, seed)
                row += f" {gap:+.3f} [{low:+.3f}, {high:+.3f}]"
        print(row)
        if t.causes:
            print(f"    failures: {dict(t.causes)}")


def print_logprob_cost(tallies: dict[str, Tally]) -> None:
    """Seconds per judgment with logprobs over without, same prompt, same pairs."""
    for on, off, prompt in (
        ("default", "no-logprobs", "passage-v1"),
        ("short-logprobs", "short", "passage-short-v1"),
    ):
        if on in tallies and off in tallies:
            a, b = tallies[on], tallies[off]
            same = sum(a.grades[p] == b.grades.get(p) for p in a.grades)
            s_on, s_off = a.seconds / len(a.grades), b.seconds / len(b.grades)
            print(
                f"logprob cost ({prompt}): {s_on:.2f} s a judgment with logprobs, {s_off:.2f} s "
                f"without: {s_on / s_off:.2f}x; same grade on {same} of {len(a.grades)} pairs"
            )


def _texts(pairs: Pairs) -> dict[str, dict[str, str]]:
    import json

    queries = dict(
        line.split("\t", 1) for line in pairs.queries.read_text("utf-8").splitlines() if line
    )
    docs = {}
    for line in pairs.docs.read_text("utf-8").splitlines():
        row = json.loads(line)
        docs[row["doc_id"]] = row["text"]
    return {"q": queries, "d": docs}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=32, help="pairs, N/4 per grade (32)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(MODELS))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=8, help="pairs per arm in turn (8)")
    parser.add_argument("--ctx", type=int, default=2048, help="the server's context (2048)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--base-url", help="a server already running (its model --model)")
    parser.add_argument("--server-log", type=Path, help="that server's log (prefix-match hits)")
    parser.add_argument("--work", type=Path, default=ROOT / ".venv-llama" / "real-cost")
    parser.add_argument("--models-cache", type=Path, default=ROOT / ".venv-llama" / "models")
    parser.add_argument("--llama-python", type=Path, default=ROOT / ".venv-llama/bin/python")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    unknown = set(args.arms.split(",")) - set(ARMS)
    if unknown:
        raise SystemExit(f"unknown arms {sorted(unknown)}: choose among {', '.join(ARMS)}")
    args.work = args.work / time.strftime("%Y%m%d-%H%M%S")  # a fresh store: nothing cached
    args.work.mkdir(parents=True)
    pairs = load_pairs(args.data, args.pairs, args.seed, args.work)
    server = None
    if args.base_url:
        args.url = args.base_url
    else:
        path = fetch(MODELS[args.model], args.models_cache)
        server = LlamaServer(
            args.llama_python, path, args.model, args.work / "server.log", args.ctx
        )
        args.url, args.server_log = server.url, server.log
    print(
        f"real_cost: {len(pairs)} TREC DL 2019 pairs, seed {args.seed}, model {args.model}, "
        f"llama.cpp server one request at a time, chunks of {args.chunk} in turn; "
        f"cpu count {os.cpu_count()}, load {os.getloadavg()[0]:.2f}"
    )
    try:
        tallies = run_arms(pairs, _texts(pairs), args)
    finally:
        if server is not None:
            server.stop()
    print_table(tallies, pairs, args.seed)
    print_logprob_cost(tallies)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
