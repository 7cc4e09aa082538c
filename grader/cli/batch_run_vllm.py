"""`relgrade batch run --engine vllm`: print, or run (--exec), vLLM run-batch per request file
of this node's share (`grader.batch.engines.vllm_run`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.batch.engines.request_dir import RequestFile
from grader.batch.engines.vllm_run import (
    answered,
    command,
    find_vllm,
    node_share,
    run_one,
    shell_line,
)
from grader.cli.batch_run import say


def run_vllm(args: argparse.Namespace, files: list[RequestFile], out_dir: Path) -> int:
    share = node_share(files, args.node, args.nodes)
    if args.base_url:
        say("--base-url is not used by --engine vllm (run-batch loads the model itself)")
    if not args.exec:
        for file in share:
            print(shell_line(command(file, out_dir)))
        return 0
    vllm = find_vllm()
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for n, file in enumerate(share, 1):
        if answered(file, out_dir):
            say(f"[{n}/{len(share)}] {file.path.name}: results already whole, skipped")
            continue
        argv = command(file, out_dir, vllm)
        say(f"[{n}/{len(share)}] {shell_line(argv)}")
        code = run_one(argv)
        if code != 0:
            failed += 1
            say(f"[{n}/{len(share)}] {file.path.name}: vllm exited {code}")
    say(
        f"node {args.node} of {args.nodes}: {len(share)} request files, {failed} failed; "
        f"then: relgrade batch import --store {args.store} {out_dir}"
    )
    return 1 if failed else 0
