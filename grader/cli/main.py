"""`relgrade` entry point: builds the sub-command parsers and maps errors to exit codes.

Exit codes: 0 success, 1 runtime failure, 2 bad input (file, flag, prompt), 3 budget reached,
130 interrupted (Ctrl-C; the store is left resumable).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from grader import __version__
from grader.errors import RelgradeError

# Each module defines `register(subparsers)`, which adds its parser and sets `func(args) -> int`.
COMMAND_MODULES: tuple[str, ...] = (
    "evaluate",
    "grade",
    "prompts",
    "calibrate",
    "sample",
    "annotate",
    "regrade",
    "batch",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relgrade",
        description=(
            "Graded relevance labels (0-3) from LLMs, validated and stored; calibration against "
            "human grades; IR metrics that agree with trec_eval."
        ),
    )
    parser.add_argument("--version", action="version", version=f"relgrade {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"grader.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except RelgradeError as exc:
        print(f"relgrade {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"relgrade {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
