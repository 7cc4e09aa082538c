"""The request files `batch run` answers (a folder's `.jsonl` files, or one), each of an export
this store records, with the model it asked; and its results files, one per request file, named so
`batch import DIR` takes the folder. Results lines are appended whole and flushed, so a stopped
run leaves an importable file: at worst a last line cut short, which the next run trims.
`--engine vllm` runs vLLM's own `run-batch` on this node's share of the request files (file i goes
to node i % N: a Slurm array or an indexed Kubernetes job gives each node its K)."""

from __future__ import annotations

import mmap
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from grader.batch.files.exports import ExportState, split_custom_id
from grader.batch.files.import_followup import first_record, jsonl_files
from grader.errors import InputError


@dataclass(frozen=True)
class RequestFile:
    """One request file: its absolute path, export, model and number of lines."""

    path: Path
    export_id: str
    model: str
    lines: int


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def request_files(given: Path, state: ExportState) -> list[RequestFile]:
    """The request files in `given` (a folder: its `.jsonl` files in name order; or one file),
    each of an export this store records (InputError naming the first that is not)."""
    found = []
    for path in jsonl_files([given.resolve()], "request"):
        _, request = first_record(path)
        request = request if isinstance(request, dict) else {}
        ids = split_custom_id(request.get("custom_id"))
        config = state.config(ids[0]) if ids else None
        if ids is None or config is None:
            raise InputError(
                "not a request file of an export of this store",
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
        self._files: dict[str, IO[bytes]] = {}  # (closed ones too, for `paths`)
        self.written = 0

    def write(self, request_file: str, lines: list[str]) -> None:
        """Append `lines` (no newline) to the results of `request_file`, flushed."""
        fh = self._files.get(request_file)
        if fh is None:
            path = results_name(self.out_dir, request_file)
            trim_cut_line(path)
            fh = self._files[request_file] = path.open("ab")
        fh.write("".join(line + "\n" for line in lines).encode("utf-8"))
        fh.flush()
        self.written += len(lines)

    def paths(self) -> list[Path]:
        """The results files written to, in request file order."""
        return [results_name(self.out_dir, name) for name in sorted(self._files)]

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()


def node_share(files: Sequence[RequestFile], node: int, nodes: int) -> list[RequestFile]:
    """The files of node `node` (0..nodes-1): those whose place i has i % nodes == node."""
    if nodes < 1 or not 0 <= node < nodes:
        raise InputError(f"--node {node} --nodes {nodes}: K must be in 0..N-1")
    return [f for i, f in enumerate(files) if i % nodes == node]


def command(file: RequestFile, out_dir: Path, vllm: str = "vllm") -> list[str]:
    """The run-batch command of one request file."""
    out = results_name(out_dir, file.path)
    return [vllm, "run-batch", "-i", str(file.path), "-o", str(out), "--model", file.model]


def answered(file: RequestFile, out_dir: Path) -> bool:
    """Whether the file's results file holds a complete line per request (a node restarted
    after a kill skips it)."""
    out = results_name(out_dir, file.path)
    if not out.is_file():
        return False
    data = out.read_bytes()
    return data.endswith(b"\n") and data.count(b"\n") >= file.lines


def find_vllm() -> str:
    """The `vllm` on PATH (InputError when there is none)."""
    found = shutil.which("vllm")
    if found is None:
        raise InputError(
            "--exec runs `vllm run-batch`, but there is no `vllm` on PATH",
            hint="install vLLM on this node (pip install vllm) or drop --exec to print the "
            "commands",
        )
    return found
