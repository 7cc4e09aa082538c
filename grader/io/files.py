"""Low-level file handling shared by every reader and writer.

- `.gz` files are read and written transparently.
- Text must be UTF-8; anything else is an `InputError` naming the file and line, never a crash.
- Outputs are written atomically (temp file in the same folder, fsync, rename), so a crash never
  leaves half a file behind.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from grader.errors import InputError


def _open_binary(path: Path) -> IO[bytes]:
    if not path.exists():
        raise InputError("file not found", path=path, hint="check the path")
    if path.is_dir():
        raise InputError("is a folder, not a file", path=path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its newline) of a UTF-8 text file (or .gz)."""
    p = Path(path)
    with _open_binary(p) as fh:
        lineno = 0
        try:
            for raw in fh:
                lineno += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(
                        f"not valid UTF-8 (byte {exc.start} of the line)",
                        path=p,
                        line=lineno,
                        hint="re-encode the file as UTF-8",
                    ) from None
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield lineno, line.rstrip("\r\n")
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"cannot read: {exc}", path=p, line=lineno + 1) from None


def read_text(path: str | Path) -> str:
    """The whole file as text (UTF-8, or .gz of UTF-8)."""
    p = Path(path)
    with _open_binary(p) as fh:
        try:
            data = fh.read()
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"cannot read: {exc}", path=p) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            "not valid UTF-8", path=p, line=line, hint="re-encode the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def _default_file_mode() -> int:
    """The mode a plain `open(path, "w")` would give (0o666 less the umask); mkstemp gives 0o600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[IO[str]]:
    """Open `path` for writing text; it appears only when the block ends without an exception.

    Writes gzip when the name ends in `.gz`. On error the temp file is removed and any existing
    file at `path` is left untouched.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.exists():
        raise InputError("the output folder does not exist", path=target, hint="create it first")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as raw:
            binary: IO[bytes] = raw
            if target.suffix == ".gz":
                binary = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)  # type: ignore[assignment]
            text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
            yield text
            text.flush()
            text.detach()
            if binary is not raw:
                binary.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, _default_file_mode())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
