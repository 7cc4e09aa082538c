"""What `batch collect` prints and writes once the open jobs are collected: the diff and
--out/--qrels-out, as the `regrade` command that submitted them would (its --select is stored
with its jobs)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from grader.batch.api.state import BatchState, Job
from grader.cli.regrade_output import OUTPUTS_PENDING, diff_json, render_table, write_outputs
from grader.errors import InputError
from grader.regrade.diff import diff_versions
from grader.regrade.run import RegradeOutcome
from grader.regrade.selection import parse_selection, select_candidates, version_pairs
from grader.store.store import Store


def add_output_options(p: argparse.ArgumentParser) -> None:
    """collect's flags for what regrade writes: --out, --qrels-out, --format, --show."""
    p.add_argument("--out", metavar="J.jsonl", help="write the new judgments (JSONL)")
    p.add_argument("--qrels-out", metavar="QRELS", help="write the new grades as TREC qrels")
    p.add_argument("--format", choices=["table", "json"], default="table", help="diff format")
    p.add_argument("--show", type=int, default=20, metavar="N", help="changed pairs shown (20)")


def _config_id(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True)


def job_versions(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The distinct judge configurations of `jobs` (one per version they regrade), in order."""
    found: dict[str, dict[str, Any]] = {}
    for job in jobs:
        found.setdefault(_config_id(job.judge_config), job.judge_config)
    return list(found.values())


def check_one_version(args: argparse.Namespace, versions: Sequence[dict[str, Any]]) -> None:
    """--out/--qrels-out hold one version: refuse them before collecting jobs of several."""
    if len(versions) > 1 and (args.out or args.qrels_out):
        listed = ", ".join(f"{v.get('prompt_id')} ({v.get('model')})" for v in versions)
        raise InputError(
            f"the open jobs regrade {len(versions)} versions ({listed}); --out/--qrels-out "
            "hold one",
            hint="collect without --out/--qrels-out, then rerun each `regrade` command to "
            "write its outputs (it sends nothing for pairs already regraded)",
        )


def version_outcome(
    store: Store, state: BatchState, config: dict[str, Any], batch_discount: float
) -> RegradeOutcome:
    """The regrade of one version as its command would see it now: selection, pairs, diff."""
    select = config.get("select")
    candidates = select_candidates(store, parse_selection(select or []), config["fingerprint"])
    if select is None:  # a job stored before its --select was: the pairs of its jobs
        keys = {
            item.key
            for job in state.jobs()
            if _config_id(job.judge_config) == _config_id(config)
            for item in state.items(job.job_id)
        }
        candidates = [c for c in candidates if c.new_key in keys]
    pairs = version_pairs(store, candidates)
    diff = diff_versions(
        pairs, batch_keys=state.keys_with_outcome("batch"), batch_discount=batch_discount
    )
    return RegradeOutcome(candidates=candidates, pairs=pairs, diff=diff)


def print_and_write(args: argparse.Namespace, outcomes: Sequence[RegradeOutcome]) -> int:
    """Print each version's diff (stdout) and write the outputs of a finished one; 1 when
    some new judgment failed, else 0."""
    if args.format == "json":
        data = [diff_json(outcome) for outcome in outcomes]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2))
    else:
        print("\n\n".join(render_table(o.diff, show=args.show) for o in outcomes))
    for outcome in outcomes:
        if not (args.out or args.qrels_out):
            continue
        if outcome.diff.pending:
            print(OUTPUTS_PENDING, file=sys.stderr)
        else:
            write_outputs(args, outcome)
    return 1 if any(o.diff.failed for o in outcomes) else 0
