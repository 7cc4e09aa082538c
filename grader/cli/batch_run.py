"""`relgrade batch run --engine ray|vllm`: the engine step between `batch export` and `batch
import` (`grader.batch.engines`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grader.batch.engines.request_dir import RequestFile, request_files
from grader.cli.flags import add_store
from grader.errors import InputError

RUN_EPILOG = """\
--engine ray: Ray Data reads the request files and its actors answer every line with relgrade's
own request function (one actor per node of the cluster, at least 2, or --actors N;
--concurrency requests in flight in all, shared by the actors, spread over every --base-url,
least in flight first; a reply that is not JSON, or a server error, becomes an error line for
that request). Each answer is written to DIR/NAME.results.jsonl as it comes, so Ctrl-C leaves
what was written importable. Ray is at-least-once: a block whose worker died is run again; the
run says how many requests were sent more than once. On a cluster (--ray-address), REQUEST_DIR
and DIR must sit on storage every node sees, and relgrade must be installed on every node.

--engine vllm: `vllm run-batch` for this node's share of the files (--node K --nodes N: file i
goes to node i % N), with the export's model; the commands are printed, or run with --exec
(files whose results are whole already are skipped).

Then: relgrade batch import --store DB DIR
"""


def register(actions: Any) -> None:
    """Add `run` to `relgrade batch`."""
    p = actions.add_parser(
        "run",
        help="answer exported request files with Ray Data or vLLM run-batch",
        description="Answer the request files of `relgrade batch export` with an engine: Ray "
        "Data against OpenAI-compatible servers, or vLLM run-batch on this node's share.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        help="request actors (ray; default: one per node of the cluster, at least 2, at most "
        "--concurrency)",
    )
    p.add_argument("--node", type=int, default=0, metavar="K", help="this node, 0..N-1 (vllm)")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes in all (vllm)")
    p.add_argument("--exec", action="store_true", help="run the vllm commands, not print them")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run_run)


def _files(args: argparse.Namespace) -> list[RequestFile]:
    from grader.batch.files.exports import ExportState
    from grader.store.store import Store

    if not Path(args.store).is_file():
        raise InputError(
            "no store here", path=args.store, hint="give the --store batch export used"
        )
    with Store(args.store) as store, ExportState(store) as state:
        return request_files(Path(args.request_dir), state)


def _out_dir(args: argparse.Namespace) -> Path:
    if args.out_dir:
        return Path(args.out_dir).resolve()
    given = Path(args.request_dir).resolve()
    return (given if given.is_dir() else given.parent).parent / "results"


def run_run(args: argparse.Namespace) -> int:
    if args.engine == "vllm":
        from grader.cli.batch_run_vllm import run_vllm

        return run_vllm(args, _files(args), _out_dir(args))
    from grader.cli.batch_run_ray import run_ray_command

    return run_ray_command(args, _files(args), _out_dir(args))


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
