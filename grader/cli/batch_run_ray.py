"""`relgrade batch run --engine ray`: Ray Data over the request files with relgrade's own
request function (`grader.batch.engines.ray_run`), progress on stderr and what was paid twice."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.batch.engines.ray_run import RayOutcome, RayRun, check_paths, import_ray, run_ray
from grader.batch.engines.request_dir import RequestFile
from grader.cli.batch_run import say
from grader.errors import InputError


class _Progress:
    """At most one line a second: results written of all, per second, ETA."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.quiet, self.last = total, quiet, 0.0

    def __call__(self, written: int, seconds: float) -> None:
        if self.quiet or seconds - self.last < 1.0:
            return
        self.last = seconds
        rate = written / seconds if seconds > 0 else 0.0
        eta = f", ETA {(self.total - written) / rate:,.0f} s" if rate > 0 else ""
        say(f"ray: {written:,} of {self.total:,} requests answered, {rate:,.0f}/s{eta}")


def run_ray_command(args: argparse.Namespace, files: list[RequestFile], out_dir: Path) -> int:
    if args.concurrency < 1:
        raise InputError(f"--concurrency {args.concurrency}: give 1 or more")
    if args.actors is not None and not 1 <= args.actors <= args.concurrency:
        raise InputError(f"--actors {args.actors}: give 1 to --concurrency ({args.concurrency})")
    check_paths(Path(args.request_dir), out_dir, args.base_url)
    import_ray()  # before anything starts: the install hint, exit 2
    total = sum(f.lines for f in files)
    run = RayRun(
        request_files=[f.path for f in files],
        out_dir=out_dir,
        base_urls=list(args.base_url),
        address=args.ray_address,
        concurrency=args.concurrency,
        actors=args.actors,
    )
    outcome = run_ray(run, _Progress(total, args.quiet))
    _report(args, outcome, total, out_dir)
    if outcome.interrupted:
        return 130
    return 1 if outcome.error_lines or outcome.written < total else 0


def _report(args: argparse.Namespace, outcome: RayOutcome, total: int, out_dir: Path) -> None:
    sent = outcome.sent
    servers = ", ".join(f"{args.base_url[i]}: {n:,}" for i, n in sorted(sent.per_server.items()))
    stopped = "interrupted: " if outcome.interrupted else ""
    say(
        f"{stopped}{outcome.written:,} of {total:,} requests answered "
        f"({outcome.error_lines:,} error lines) in {len(outcome.results)} results files; "
        f"{sent.sent:,} requests sent ({servers}) by {outcome.actors} actors on "
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
