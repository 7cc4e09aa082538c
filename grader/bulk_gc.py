"""The cyclic garbage collector during bulk work (batch files of a million lines).

Such work makes ~100 short-lived objects a line, and a block of lines keeps a few thousand lines'
objects alive until it is written. Automatic collections would walk those again and again, as
costly as the rest of the work. Inside `collect_by_hand`
automatic collections are off and the work calls `collect()` after each block, so what holds
a reference cycle is still freed, once, when its block is done.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collect_by_hand() -> Iterator[None]:
    """Automatic collections off inside (as they were after); collect with `collect()`. What
    is alive on entry (modules, the store) is frozen (`gc.freeze`) until the end, so each
    collection walks only what the work made since."""
    was_on = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_on:
            gc.enable()


def collect() -> None:
    """A full collection: what a block of work left behind (objects frozen with `gc.freeze`,
    such as a worker's modules, are not walked)."""
    gc.collect()
