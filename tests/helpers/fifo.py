"""Real FIFOs for tests: a writer thread feeds one reader, and never lets a test hang.

A reader that opens a FIFO twice blocks in its second `open` forever. The writer here, once
its data is written, keeps opening the FIFO for writing without blocking and closes it at once:
a second open then reads an empty file instead of hanging, so the test fails on its answer.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path


def _feed(path: Path, data: bytes, done: threading.Event) -> None:
    try:
        with open(path, "wb") as fh:  # blocks until a reader opens
            fh.write(data)
    except OSError:
        pass  # the reader stopped early (an error on a line): nothing more to give
    while not done.wait(0.05):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue  # no reader waiting
        os.close(fd)  # a reader that opened again sees an empty file, not a hang


@contextlib.contextmanager
def fifo(path: Path, data: bytes) -> Iterator[Path]:
    """A FIFO at `path` whose first reader reads `data`."""
    os.mkfifo(path)
    done = threading.Event()
    writer = threading.Thread(target=_feed, args=(path, data, done), daemon=True)
    writer.start()
    try:
        yield path
    finally:
        done.set()
        # A FIFO nobody opened still holds its writer: open it to let the writer finish.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            while writer.is_alive():
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 1 << 16)
                writer.join(0.01)
        finally:
            os.close(fd)
