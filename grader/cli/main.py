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
# Only the module of the command being run is imported (the others pull in the openai SDK,
# pandas, matplotlib...), so `relgrade evaluate` and `relgrade --help` start fast; the one-line
# summaries below are what `relgrade --help` lists.
COMMANDS: dict[str, str] = {
    "evaluate": "score runs against qrels (nDCG, RR, P, R, AP, ...), identical to trec_eval",
    "grade": "grade run results 0-3 with an LLM or the lexical baseline",
    "prompts": "list, show or render prompt files",
    "calibrate": "agreement of LLM grades with human grades, bias, system ranking, estimates",
    "sample": "draw a blind spot-check sample for people to grade, or import their grades",
    "annotate": "grade a blind sample in a local web page (keys 0-3), or export the grades",
    "regrade": "regrade stored judgments with a new prompt or model; diff old vs new",
    "batch": "status and collection of Batch API jobs kept in a store",
}


def _command_in(argv: Sequence[str]) -> str | None:
    """The sub-command named in argv (the first word that is not an option), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; `command`'s own options are loaded (None: every command's, as for tests)."""
    parser = argparse.ArgumentParser(
        prog="relgrade",
        description=(
            "Graded relevance labels (0-3) from LLMs, validated and stored; calibration against "
            "human grades; IR metrics that agree with trec_eval."
        ),
        epilog="Run `relgrade COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"relgrade {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, summary in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f"grader.cli.{name}").register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(words)
    parser = build_parser(command or "")
    args = parser.parse_args(words)
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
