"""`--judge` and `--judge-config`, shared by the commands that grade (`grade`, `regrade`,
`batch export`): the choices are the registered judges (`grader.judges.registry`)."""

from __future__ import annotations

import argparse

from grader import defaults
from grader.judges.registry import judge_kinds


def add_judge_options(p: argparse.ArgumentParser, *, batch: bool = False) -> None:
    """--judge NAME (the registered judges; `batch`: those the Batch API can send) and
    --judge-config FILE (--lexical-config, its older name)."""
    kinds = judge_kinds(batch=batch)
    listed = "; ".join(f"{k.name}: {k.help}" for k in kinds)
    p.add_argument(
        "--judge",
        choices=[k.name for k in kinds],
        default=defaults.JUDGE,
        help=f"which judge grades ({listed}; default {defaults.JUDGE})",
    )
    p.add_argument(
        "--judge-config",
        "--lexical-config",
        dest="judge_config",
        metavar="FILE",
        help="the judge's own settings file (lexical: its TOML; default ./relgrade-lexical.toml "
        "as written by calibrate --fit-lexical, if present, else the shipped "
        "prompts/lexical-v1.toml)",
    )
