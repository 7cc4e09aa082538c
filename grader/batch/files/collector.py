"""The cyclic garbage collector during a batch export or import (~100 short-lived objects a
line), on the caller's request (`freeze_gc`): what stays alive is not walked again and again."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """What is alive on entry is left out of every collection inside (`gc.freeze`)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def collect_by_hand() -> Iterator[None]:
    """`frozen`, and automatic collections off inside (as they were after): the work calls
    `gc.collect()` after a block of lines, so what holds a reference cycle is freed once."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        with frozen():
            yield
    finally:
        if was_on:
            gc.enable()
