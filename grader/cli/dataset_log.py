"""ir_datasets' own log lines while a command reads `--dataset`, told once.

ir_datasets logs to stderr as it downloads: notices before a download (the data's usage
agreement, where a local copy may be linked), a line per retry, a warning when it gives up.
Offline, that is a screen of lines before relgrade's one-line error says the same. So the
notices are held until ir_datasets moves past the download (its next progress line) or the
command ends well, and dropped when the command fails; retry lines are dropped (a download that
then succeeds needs none, one that fails gets relgrade's error).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def held_dataset_log() -> Iterator[None]:
    """Hold ir_datasets' notices for the command inside, as the module says."""
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
