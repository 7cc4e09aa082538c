"""The error hierarchy. Library code raises these; only the CLI prints them and picks exit codes."""

from __future__ import annotations

from pathlib import Path


class RelgradeError(Exception):
    """Base class of every error relgrade raises on purpose."""

    exit_code: int = 1


class InputError(RelgradeError):
    """A user-supplied file or argument is wrong; the message names the file, line and fix."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        if self.path == "-":  # the one opener reads `-` from stdin
            self.path = "stdin"
        self.line = line
        self.hint = hint
        self.reason = message
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        text = where + message
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class PromptError(RelgradeError):
    """A prompt file is missing, malformed or cannot be rendered."""

    exit_code = 2


class NotAJudgePrompt(PromptError):
    """The name is a shipped settings file beside the prompts, not a judge prompt."""


class JudgeError(RelgradeError):
    """A judge could not produce a valid grade (after its retries)."""


class ServerNotAnswering(JudgeError):
    """The LLM server stopped answering (timeouts or refusals in a row): the run stops."""

    exit_code = 2


class NoBatchAPI(JudgeError):
    """The server has no Batch API (404): a batch regrade cannot start there."""

    exit_code = 2


class StoreError(RelgradeError):
    """The judgment store is unreadable, from a newer version, or locked."""


class NotAStore(StoreError, InputError):
    """The store path is not a relgrade store: bad input (exit 2)."""


class DiskFullError(RelgradeError):
    """An output's file system has no room left: what was half written is removed."""

    exit_code = 2


class BudgetError(RelgradeError):
    """Going on would spend more than `--max-cost` allows."""

    exit_code = 3


class RelgradeWarning(UserWarning):
    """A notice the command prints on stderr, raised by the library as a Python warning."""
