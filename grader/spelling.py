"""How a message names an option: the flag (`--clamp`) while a command runs (`command_line()`,
around each command in grader/cli/main.py), else the Python keyword (`clamp=True`)."""

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
