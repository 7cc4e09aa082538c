"""The request files `batch run` answers (a folder's `.jsonl` files, or one), each of an export
this store records, with the model it asked; and its results files, one per request file, named so
`batch import DIR` takes the folder. Results lines are appended whole and flushed, so a stopped
run leaves an importable file: at worst a last line cut short, which the next run trims."""

from __future__ import annotations

import json
import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from grader.batch.files.exports import ExportState, split_custom_id
from grader.batch.files.import_followup import jsonl_files
from grader.errors import InputError


@dataclass(frozen=True)
class RequestFile:
    """One request file: its absolute path, export, model and number of lines."""

    path: Path
    export_id: str
    model: str
    lines: int


def _first_request(path: Path) -> dict[str, object]:
    with path.open("rb") as fh:
        first = fh.readline()
    try:
        request = json.loads(first)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        raise InputError("not a request file of `relgrade batch export`", path=path, line=1)
    return request


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def request_files(given: Path, state: ExportState) -> list[RequestFile]:
    """The request files in `given` (a folder: its `.jsonl` files in name order; or one file),
    each of an export this store records (InputError naming the first that is not)."""
    found = []
    for path in jsonl_files([given.resolve()], "request"):
        request = _first_request(path)
        ids = split_custom_id(request.get("custom_id"))
        config = state.config(ids[0]) if ids else None
        if ids is None or config is None:
            raise InputError(
                "a request file of no export of this store",
                path=path,
                hint="give the --store that `relgrade batch export` wrote to",
            )
        body = request.get("body")
        model = config.get("model") or (body.get("model") if isinstance(body, dict) else None)
        found.append(RequestFile(path, ids[0], str(model), _count_lines(path)))
    return found


def results_name(out_dir: Path, request_file: str | Path) -> Path:
    """The results file of a request file: `NAME.results.jsonl` beside the others in
    `out_dir`."""
    return out_dir / f"{Path(request_file).stem}.results.jsonl"


def trim_cut_line(path: Path) -> None:
    """Drop a last line with no newline (a run killed while writing it)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            size, keep = len(data), data.rfind(b"\n") + 1
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
