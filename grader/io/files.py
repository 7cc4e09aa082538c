"""Reading text lines and writing outputs atomically (a temp file
`.NAME.relgrade-HOST-PID-XXXXXXXX.tmp` beside the target, fsync, rename); a temp file a kill left
behind is removed by the next write of the target once its process is gone. Outputs written
together (`OutputSet`) keep a marker beside the first listing those rewritten so far: a marker
whose process is gone tells the next run the set was left half written."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from grader.errors import InputError
from grader.io.spool import open_binary
from grader.io.streams import (
    LINE_LIMIT,
    bounded_lines,
    coded,
    compression_of,
    not_utf8,
)

STALE_AFTER_HOURS = 24.0  # a temp file of a live process (or another host's) this old is stale
PAUSE_ENV = "RELGRADE_TEST_WRITE_PAUSE"  # tests only: `NAME:SECONDS`, wait before renaming NAME
_TEMP_RE = re.compile(r"\.relgrade-(?P<host>[A-Za-z0-9]*)-(?P<pid>\d+)-[a-z0-9_]+\.tmp")


def iter_lines(path: str | Path, *, limit: int = LINE_LIMIT) -> Iterator[tuple[int, str]]:
    """(line number, line without its newline) of a UTF-8 text file; lines up to `limit` bytes."""
    p = Path(path)
    with open_binary(p) as fh:  # a read error is an InputError already (`streams.guarded`)
        for lineno, raw in enumerate(bounded_lines(fh, p, limit), 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(p, lineno, exc.start) from None
            yield lineno, (line.removeprefix("\ufeff") if lineno == 1 else line).rstrip("\r\n")


def content_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line that is not blank; numbering counts blank lines too."""
    for lineno, line in iter_lines(path):
        if line.strip():
            yield lineno, line


def parse_json_object(path: str | Path, lineno: int, line: str) -> dict[str, Any]:
    """One JSONL line as a dict, or an InputError saying why it is not a JSON object."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON ({exc.msg} at column {exc.colno})",
            path=path,
            line=lineno,
            hint="each line must be one JSON object",
        ) from None
    if not isinstance(value, dict):
        raise InputError(
            f"expected a JSON object, found {type(value).__name__}", path=path, line=lineno
        )
    return value


def empty_file_error(path: str | Path, what: str, example: str) -> InputError:
    """The error for a file with no records."""
    return InputError(f"no {what} in the file (it is empty)", path=path, hint=f"expected {example}")


def twice_error(path: str | Path, what: str, first: int, line: int, hint: str) -> InputError:
    """The error for `what` (an id, a pair) given on two lines of a file."""
    return InputError(
        f"{what} appears twice, on lines {first} and {line}", path=path, line=line, hint=hint
    )


def read_text(path: str | Path) -> str:
    """The whole file as text (UTF-8, or .gz of UTF-8)."""
    p = Path(path)
    with open_binary(p) as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1  # of the line
        raise not_utf8(p, data.count(b"\n", 0, start) + 1, exc.start - start) from None
    return text.removeprefix("\ufeff")


def host_tag() -> str:
    """This host's name, letters and digits only (part of temp file and marker names)."""
    import socket  # writers only: readers (`relgrade evaluate`) start without it

    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32]


def writer_gone(host: str, pid: int) -> bool:
    """Whether process `pid` of `host` is known to be gone (only this host's can be checked)."""
    if host != host_tag() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's live process
    return False


def remove_stale_temp_files(path: str | Path) -> list[Path]:
    """Remove the temp files `atomic_write` left beside `path` whose writer is gone: its process is
    dead (same host), or the file is older than STALE_AFTER_HOURS (never another program's files).
    Returns those removed, for the caller to report."""
    target = Path(path)
    prefix = f".{target.name}"
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        match = (
            _TEMP_RE.fullmatch(entry.name, len(prefix)) if entry.name.startswith(prefix) else None
        )
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(FileNotFoundError):  # another writer removed it first
            age = time.time() - entry.stat(follow_symlinks=False).st_mtime
            if age > STALE_AFTER_HOURS * 3600 or writer_gone(match["host"], int(match["pid"])):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return sorted(removed)


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[IO[str]]:
    """Open `path` for writing text (compressed as its name says); it appears only when the block
    ends without an exception, else any file at `path` is left untouched."""
    target = Path(path)
    folder = target.parent
    if not folder.exists():
        raise InputError("the output folder does not exist", path=target, hint="create it first")
    remove_stale_temp_files(target)
    import tempfile  # writers only, as socket

    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.relgrade-{host_tag()}-{os.getpid()}-", suffix=".tmp", dir=folder
    )
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as raw:
            binary = coded(raw, compression_of(target), "wb")
            text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
            yield text
            text.flush()
            text.detach()
            if binary is not raw:
                binary.close()
            raw.flush()
            os.fsync(raw.fileno())
        name, _, seconds = os.environ.get(PAUSE_ENV, "").rpartition(":")
        if name and name == target.name:  # a crash test kills the process meanwhile
            time.sleep(float(seconds))
        umask = os.umask(0)  # the mode `open(path, "w")` would give; mkstemp gives 0o600
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


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

    def previous(self) -> IncompleteOutputs | None:
        """The set an earlier run left half written here, or None (none, or a live writer's)."""
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
            if not writer_gone(host, pid) and age < STALE_AFTER_HOURS * 3600:
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
