"""Outputs of one run that belong together (judgments and qrels), with a marker beside the first
listing those rewritten so far: a marker whose process is gone tells the next run the set was
left half written (`previous()`)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grader.io.files import STALE_AFTER_HOURS, atomic_write, host_tag, writer_gone


@dataclass(frozen=True)
class IncompleteOutputs:
    """What a killed run left: the set it was writing and the files it had rewritten."""

    marker: Path
    pid: int
    started: str
    targets: tuple[Path, ...]
    written: tuple[Path, ...]

    @property
    def not_written(self) -> tuple[Path, ...]:
        return tuple(t for t in self.targets if t not in self.written)

    def describe(self) -> str:
        """One sentence for a warning: which outputs do not belong with the others."""
        done = ", ".join(map(str, self.written)) or "none"
        missing = ", ".join(map(str, self.not_written))
        return (
            f"a run (pid {self.pid}, started {self.started}) was killed while writing its "
            f"outputs: rewritten {done}; not rewritten {missing} (missing, or left from an "
            "earlier run, so it does not match the others)"
        )


class OutputSet:
    """The outputs of one run, written together (see the module docstring)."""

    def __init__(self, targets: Sequence[str | Path]):
        self.targets = tuple(Path(t).absolute() for t in targets)
        first = self.targets[0] if self.targets else Path(".").absolute()
        self.marker = first.with_name(f".{first.name}.relgrade-outputs.json")
        self._written: list[Path] = []
        self._started = ""

    def previous(self, *, max_age_hours: float = STALE_AFTER_HOURS) -> IncompleteOutputs | None:
        """The set an earlier run left half written here, or None (none, or still being written
        by a live process)."""
        try:
            record = json.loads(self.marker.read_text(encoding="utf-8"))
            pid, host = int(record["pid"]), str(record["host"])
            targets = tuple(Path(t) for t in record["targets"])
            written = tuple(Path(t) for t in record["written"])
            started = str(record["started"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):  # unreadable: say what we can
            pid, host, targets, written, started = -1, "", self.targets, (), "unknown"
        with contextlib.suppress(OSError):
            age = time.time() - self.marker.stat().st_mtime
            if not writer_gone(host, pid) and age < max_age_hours * 3600:
                return None  # another run is writing them right now, or this one
        return IncompleteOutputs(self.marker, pid, started, targets, written)

    def begin(self) -> None:
        """Mark the set as being written (before the first file)."""
        self._written = []
        if self.targets:
            self._save(datetime.now(UTC).isoformat(timespec="seconds"))

    def finish(self) -> None:
        """Every file is written: the set is complete, the marker goes."""
        with contextlib.suppress(FileNotFoundError):
            self.marker.unlink()

    def done(self, target: str | Path) -> None:
        """Record that `target` has been rewritten (after each file but the last)."""
        path = Path(target).absolute()
        if path in self.targets and path not in self._written:
            self._written.append(path)
            self._save(self._started)

    def _save(self, started: str) -> None:
        self._started = started
        record = {
            "pid": os.getpid(),
            "host": host_tag(),
            "started": started,
            "targets": [str(t) for t in self.targets],
            "written": [str(t) for t in self._written],
        }
        with atomic_write(self.marker) as fh:
            json.dump(record, fh)
