"""The lines the CLI prints while a store's write lock is held by another process.

The store only reports its waits (`grader.store.busy.StoreBusyEvent`); this is the callback the
commands give it. Called from the writer's thread too, so it only prints.
"""

from __future__ import annotations

import sys

from grader.store.busy import StoreBusyEvent


def busy_text(event: StoreBusyEvent) -> str:
    """One line about a wait for the store (started, still going, journaled, or over)."""
    if event.over:
        text = f"store free again after {event.waited_s:.1f} s: {event.path}"
        if event.journaled:
            text += f" ({event.journaled} answers went through the journal; all stored)"
        return text
    text = (
        f"store busy, waiting (held by another process): {event.path}, {event.what}, "
        f"{event.waited_s:.0f} s so far"
    )
    kept = []
    if event.held:
        kept.append(f"{event.held} answers kept in memory")
    if event.journaled:
        kept.append(f"{event.journaled} in the journal {event.journal}")
    if kept:
        text += "; " + ", ".join(kept) + " until it is free"
    return text


def print_store_busy(event: StoreBusyEvent) -> None:
    """Print `event` on stderr (the `on_busy` callback of the commands' stores)."""
    print(busy_text(event), file=sys.stderr, flush=True)
