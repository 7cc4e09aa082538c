"""`relgrade batch run --engine vllm`: vLLM's own `run-batch` on this node's share of the
request files (file i goes to node i % N: a Slurm array or an indexed Kubernetes job gives each
node its K), one results file per request file."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from grader.batch.engines.request_dir import RequestFile, results_name
from grader.errors import InputError


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
