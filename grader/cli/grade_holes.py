"""The flags of grading on top of people's labels (`--skip-judged HUMAN_QRELS`): what they ask
is `grader.job.people`'s."""

from __future__ import annotations

import argparse


def add_flags(p: argparse.ArgumentParser) -> None:
    """The flags of labels on top of people's (see DESIGN.md)."""
    p.add_argument(
        "--merged-out",
        metavar="MERGED.qrels",
        help="with one --skip-judged: write people's grades (as written, any integer) and the "
        "LLM's on the holes, as TREC qrels; failed judgments stay holes",
    )
    p.add_argument(
        "--llm-scale",
        metavar="MAP",
        help="how --merged-out writes LLM grades, e.g. 0:0,1:1,2:4,3:7 for a 0..7 human scale "
        "(default identity 0:0,1:1,2:2,3:3)",
    )
    p.add_argument(
        "--also-judged",
        type=int,
        metavar="N",
        help="also grade N pairs people judged (drawn at random, seeded by --seed) so that "
        "calibrate measures agreement on this collection; the draw's manifest is written "
        "beside --out / --qrels-out",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --also-judged's draw (0)")
    p.add_argument(
        "--stratify",
        action="store_true",
        help="--also-judged draws the same expected count from each human grade",
    )
