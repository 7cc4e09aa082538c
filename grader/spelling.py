"""How a message names an option: the flag on the command line, the keyword in Python.

A library error that suggests a fix names the option its caller can use: `--clamp` when the
command runs, `clamp=True` from Python. The command says so around each command
(`command_line()`, in grader/cli/main.py); any other caller is a Python one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_COMMAND_LINE: ContextVar[bool] = ContextVar("relgrade_command_line", default=False)


def option(flag: str, keyword: str) -> str:
    """`flag` (e.g. "--clamp") when the command line runs, else `keyword` ("clamp=True")."""
    return flag if _COMMAND_LINE.get() else keyword


@contextmanager
def command_line() -> Iterator[None]:
    """Messages raised inside name options as flags."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)
