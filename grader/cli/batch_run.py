"""`relgrade batch run --engine ray|vllm`: the engine step between `batch export` and `batch
import` (`grader.batch.engines`)."""

from __future__ import annotations

import argparse
import shlex
import subprocess
from pathlib import Path
from typing import Any

from grader.batch.engines.request_dir import RequestFile, request_files
from grader.cli.batch_common import Printer
from grader.cli.flags import add_command, add_store
from grader.cli.stderr import open_store, say
from grader.errors import InputError

RUN_EPILOG = """\
--engine ray: Ray Data's actors answer every line with relgrade's own request function,
--concurrency in flight in all, spread over every --base-url (a reply that is not JSON, or a
server error, is an error line for that request). Each answer is written to
DIR/NAME.results.jsonl as it comes, so Ctrl-C leaves what was written importable. Ray is
at-least-once: the run says how many requests were sent more than once. On a cluster
(--ray-address), REQUEST_DIR and DIR must sit on storage every node sees, and relgrade must be
installed on every node.

--engine vllm: `vllm run-batch` for this node's share of the files (--node K --nodes N: file i
goes to node i % N), with the export's model; the commands are printed, or run with --exec
(files whose results are whole already are skipped).

Then: relgrade batch import --store DB DIR
"""


def register(actions: Any) -> None:
    """Add `run` to `relgrade batch`."""
    p = add_command(
        actions,
        "run",
        help="answer exported request files with Ray Data or vLLM run-batch",
        description="Answer the request files of `relgrade batch export` with an engine: Ray "
        "Data against OpenAI-compatible servers, or vLLM run-batch on this node's share.",
        epilog=RUN_EPILOG,
    )
    p.add_argument(
        "--engine",
        required=True,
        choices=["ray", "vllm"],
        help="ray: Ray Data against --base-url servers; vllm: vllm run-batch on this node",
    )
    add_store(p, "the store batch export recorded the request files in")
    p.add_argument("request_dir", metavar="REQUEST_DIR", help="request files (or one file)")
    p.add_argument(
        "--base-url",
        action="append",
        default=[],
        metavar="URL",
        help="OpenAI-compatible server (ray; repeat for several: all are used)",
    )
    p.add_argument(
        "--out-dir", metavar="DIR", help="results folder (default: results beside REQUEST_DIR)"
    )
    p.add_argument("--ray-address", metavar="ADDR", help="a running Ray cluster (default: local)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=64,
        metavar="N",
        help="requests in flight in all, shared by the actors (ray; 64)",
    )
    p.add_argument(
        "--actors",
        type=int,
        metavar="N",
        help="request actors (ray; default: one per node, at least 2, at most --concurrency)",
    )
    p.add_argument("--node", type=int, default=0, metavar="K", help="this node, 0..N-1 (vllm)")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes in all (vllm)")
    p.add_argument("--exec", action="store_true", help="run the vllm commands, not print them")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run_run)


def run_run(args: argparse.Namespace) -> int:
    from grader.batch.files.exports import ExportState

    with open_store(args.store, "batch export") as store, ExportState(store) as state:
        files = request_files(Path(args.request_dir), state)
    given = Path(args.request_dir).resolve()
    default = (given if given.is_dir() else given.parent).parent / "results"
    out_dir = Path(args.out_dir).resolve() if args.out_dir else default
    if args.engine == "vllm":
        return run_vllm(args, files, out_dir)
    return run_ray(args, files, out_dir)


def run_ray(args: argparse.Namespace, files: list[RequestFile], out_dir: Path) -> int:
    """Ray Data over the request files (`grader.batch.engines.ray_run`); 130 when stopped."""
    from grader.batch.engines import ray_run

    if args.concurrency < 1:
        raise InputError(f"--concurrency {args.concurrency}: give 1 or more")
    if args.actors is not None and not 1 <= args.actors <= args.concurrency:
        raise InputError(f"--actors {args.actors}: give 1 to --concurrency ({args.concurrency})")
    ray_run.check_paths(Path(args.request_dir), out_dir, args.base_url)
    ray_run.import_ray()  # before anything starts: the install hint, exit 2
    total = sum(f.lines for f in files)
    run = ray_run.RayRun(
        request_files=[f.path for f in files],
        out_dir=out_dir,
        base_urls=list(args.base_url),
        address=args.ray_address,
        concurrency=args.concurrency,
        actors=args.actors,
        lines=total,
    )
    outcome = ray_run.run_ray(run, Printer("ray", args.quiet))
    sent = outcome.sent
    servers = ", ".join(f"{args.base_url[i]}: {n:,}" for i, n in sorted(sent.per_server.items()))
    say(
        f"{'interrupted: ' if outcome.interrupted else ''}{outcome.written:,} of {total:,} "
        f"requests answered ({outcome.error_lines:,} error lines) in {len(outcome.results)} "
        f"results files; {sent.sent:,} requests sent ({servers}) by {outcome.actors} actors on "
        f"{len(sent.per_node)} nodes"
    )
    say(
        f"{sent.sent_twice:,} requests were sent more than once "
        f"(Ray retried {sent.blocks_rerun:,} blocks)"
    )
    if outcome.sent_before:
        say(
            f"{outcome.sent_before:,} requests had been sent by an earlier run into {out_dir} "
            "(paid twice: its answers never written)"
        )
    say(f"then: relgrade batch import --store {args.store} {out_dir}")
    if outcome.interrupted:
        return 130
    return 1 if outcome.error_lines or outcome.written < total else 0


def run_vllm(args: argparse.Namespace, files: list[RequestFile], out_dir: Path) -> int:
    """Print, or run (--exec), vLLM run-batch per request file of this node's share."""
    from grader.batch.engines import request_dir as vllm_run

    share = vllm_run.node_share(files, args.node, args.nodes)
    if args.base_url:
        say("--base-url is not used by --engine vllm (run-batch loads the model itself)")
    if not args.exec:
        for file in share:
            print(shlex.join(vllm_run.command(file, out_dir)))
        return 0
    vllm = vllm_run.find_vllm()
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for n, file in enumerate(share, 1):
        if vllm_run.answered(file, out_dir):
            say(f"[{n}/{len(share)}] {file.path.name}: results already whole, skipped")
            continue
        argv = vllm_run.command(file, out_dir, vllm)
        say(f"[{n}/{len(share)}] {shlex.join(argv)}")
        code = subprocess.run(argv, check=False).returncode
        if code != 0:
            failed += 1
            say(f"[{n}/{len(share)}] {file.path.name}: vllm exited {code}")
    say(
        f"node {args.node} of {args.nodes}: {len(share)} request files, {failed} failed; "
        f"then: relgrade batch import --store {args.store} {out_dir}"
    )
    return 1 if failed else 0
