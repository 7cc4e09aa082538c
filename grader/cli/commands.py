"""The sub-commands and their one-line summaries: one list for `relgrade --help` and for each
command's own parser, so the two never differ."""

from __future__ import annotations

import argparse
from typing import Any

COMMANDS: dict[str, str] = {
    "evaluate": "score runs against qrels (nDCG, RR, P, R, AP, ...), identical to trec_eval",
    "grade": "grade run results 0-3 with an LLM or the lexical baseline",
    "prompts": "list, show or render prompt files",
    "calibrate": "agreement of LLM grades with human grades, bias, system ranking, estimates",
    "sample": "draw a blind spot-check sample for people to grade, or import their grades",
    "annotate": "grade a blind sample in a local web page (keys 0-3), or export the grades",
    "regrade": "regrade stored judgments with a new prompt or model; diff old vs new",
    "batch": "Batch API jobs (status, collect); batch files for any engine (export, import, close)",
}


def add_command(sub: Any, name: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of command (or action) `name`, its help from COMMANDS unless given; an epilog
    or a description of several lines is printed as written."""
    kwargs.setdefault("help", COMMANDS.get(name))
    if kwargs.get("epilog") or "\n" in description:
        kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
    parser: argparse.ArgumentParser = sub.add_parser(name, description=description, **kwargs)
    return parser
