"""The results files of `batch run`, one per request file, named so `batch import DIR` takes the
folder. Lines are appended whole and flushed, so a stopped run leaves an importable file: at
worst a last line cut short, which the next run trims."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO


def results_name(out_dir: Path, request_file: str | Path) -> Path:
    """The results file of a request file: `NAME.results.jsonl` beside the others in
    `out_dir`."""
    return out_dir / f"{Path(request_file).stem}.results.jsonl"


def trim_cut_line(path: Path) -> None:
    """Drop a last line with no newline (a run killed while writing it)."""
    if not path.is_file():
        return
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:
            step = min(65536, keep)
            fh.seek(keep - step)
            chunk = fh.read(step)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = keep - step + cut + 1
                break
            keep -= step
        if keep != size:
            fh.truncate(keep)


class ResultsWriter:
    """Appends results lines to the results file of each request file."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self._files: dict[str, IO[bytes]] = {}
        self._names: set[str] = set()
        self.written = 0

    def write(self, request_file: str, lines: list[str]) -> None:
        """Append `lines` (no newline) to the results of `request_file`, flushed."""
        fh = self._files.get(request_file)
        if fh is None:
            path = results_name(self.out_dir, request_file)
            trim_cut_line(path)
            fh = self._files[request_file] = path.open("ab")
            self._names.add(request_file)
        fh.write("".join(line + "\n" for line in lines).encode("utf-8"))
        fh.flush()
        self.written += len(lines)

    def paths(self) -> list[Path]:
        """The results files written to, in request file order."""
        return [results_name(self.out_dir, name) for name in sorted(self._names)]

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()
