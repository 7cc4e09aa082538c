"""`relgrade` entry point: builds the sub-command parsers and maps errors to exit codes.

Exit codes: 0 success, 1 runtime failure, 2 bad input (file, flag, prompt), 3 budget reached,
130 interrupted (Ctrl-C; the store is left resumable).
"""

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
from typing import TextIO

from grader import __version__
from grader.cli.commands import COMMANDS
from grader.cli.flags import Parser
from grader.errors import RelgradeError, RelgradeWarning
from grader.spelling import command_line

# Each module defines `register(subparsers)`, which adds its parser and sets `func(args) -> int`.
# Only the module of the command being run is imported (the others pull in the openai SDK,
# pandas, matplotlib...), so `relgrade evaluate` and `relgrade --help` start fast; the one-line
# summaries in grader.cli.commands are what `relgrade --help` lists.


QUICK = frozenset({"evaluate"})
"""Commands that do no linear algebra and make few Python objects, started for speed:

- numpy's OpenBLAS starts a thread per core when numpy is imported, which slows the start on
  a loaded machine: they ask it for one (OPENBLAS_NUM_THREADS, unless set), when numpy is not
  loaded yet;
- the cyclic garbage collector runs collections while numpy and rich are imported: it is off
  for the command (which makes few reference cycles), and back on after.

Both are undone when the command returns, so an in-process caller of `main` (a test, a
notebook) keeps neither: a process it starts later gets numpy's usual threads."""


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
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


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

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, RelgradeWarning):
                print(f"warning: {message}", file=sys.stderr)
            else:
                shown(message, category, filename, lineno, file, line)

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
    """Hold ir_datasets' notices for the command inside. It logs to stderr as it downloads: a
    notice before a download (the usage agreement), a line per retry, a warning when it gives up;
    offline, a screen of lines before relgrade's one-line error says the same. So the notices
    wait until ir_datasets moves past the download (its next progress line) or the command ends
    well, and are dropped when it fails; retry lines are dropped."""
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
