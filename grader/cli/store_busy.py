"""The lines the CLI prints while a store's write lock is held by another process: the
`on_busy` callback the commands give the store (called from the writer's thread too)."""

from __future__ import annotations

import sys

from grader.job.summary import busy_text
from grader.store.busy import StoreBusyEvent


def print_store_busy(event: StoreBusyEvent) -> None:
    """Print `event` on stderr."""
    print(busy_text(event), file=sys.stderr, flush=True)
