"""`relgrade` entry point: builds the sub-command parsers and maps errors to exit codes (0 done,
1 runtime failure, 2 bad input, 3 budget reached, 130 interrupted)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from grader import __version__
from grader.cli.flags import COMMANDS, Parser
from grader.errors import RelgradeError, RelgradeWarning
from grader.spelling import command_line

# Only the module of the command being run is imported (`register(subparsers)`): the others pull
# in the openai SDK, pandas, matplotlib..., so `relgrade evaluate` and `relgrade --help` start fast.


QUICK = frozenset({"evaluate"})
"""Commands started for speed: one OpenBLAS thread (numpy starts one per core on import) and the
cyclic garbage collector off while they run (they make few cycles); both undone on return."""


@contextlib.contextmanager
def _quick(command: str | None) -> Iterator[None]:
    if command not in QUICK:
        yield
        return
    one_thread = "numpy" not in sys.modules and "OPENBLAS_NUM_THREADS" not in os.environ
    if one_thread:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        if one_thread:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _command_in(argv: Sequence[str]) -> str | None:
    """The sub-command named in argv (the first word that is not an option), if any."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; `command`'s own options are loaded (None: every command's, as for tests)."""
    parser = Parser(
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
    try:
        with _quick(command):
            return _run(command, words)
    except KeyboardInterrupt:  # while the command's modules load: nothing started yet
        print(f"relgrade{f' {command}' if command else ''}: interrupted", file=sys.stderr)
        return 130


def _run(command: str | None, words: list[str]) -> int:
    parser = build_parser(command or "")
    args, extra = parser.parse_known_args(words)
    # A command whose last positional takes any number of words (`evaluate`'s RUN ...) gets
    # those that follow an option (`evaluate QRELS --fill F RUN1 RUN2`); anything else unknown
    # is the usual usage error.
    takes = getattr(args, "extra_positionals", None)
    if extra and (takes is None or any(w.startswith("-") and w != "-" for w in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.extra_positionals = extra
    # ir_datasets' log lines are held while a command reads --dataset
    held = held_dataset_log() if getattr(args, "dataset", None) else contextlib.nullcontext()
    try:
        with command_line(), held, _warnings_as_lines():
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


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """The library's notices (RelgradeWarnings), said as the command's stderr lines."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *rest: Any, **kw: Any) -> None:
            if issubclass(category, RelgradeWarning):
                print(f"warning: {message}", file=sys.stderr)
            else:
                shown(message, category, *rest, **kw)

        warnings.showwarning = show
        yield


LOGGER = "ir_datasets"
RETRIES = ("download error", "Download failed")


class _Held(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.passing = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.passing:
            return True
        message = record.getMessage()
        if message.startswith(RETRIES):
            return False
        if message.startswith("["):  # "[starting] ...": past the download
            self.release()
            return True
        self.records.append(record)
        return False

    def release(self) -> None:
        self.passing = True
        logger = logging.getLogger(LOGGER)
        for record in self.records:
            logger.handle(record)
        self.records = []


@contextlib.contextmanager
def held_dataset_log() -> Iterator[None]:
    """Hold ir_datasets' download notices until it moves past the download or the command ends
    well; drop them, and every retry line, when it fails (relgrade's one-line error says it)."""
    held = _Held()
    logger = logging.getLogger(LOGGER)
    logger.addFilter(held)
    try:
        yield
    except BaseException:
        held.records = []
        raise
    else:
        held.release()
    finally:
        logger.removeFilter(held)


if __name__ == "__main__":
    sys.exit(main())
