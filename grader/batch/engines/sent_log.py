"""What a `batch run --engine ray` sent, counted from logs its actors append to (a line per request
sent, a line per block started): Ray runs a block again when a worker dies, so a request can be
paid twice."""

from __future__ import annotations

import collections
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SENT_DIR = ".sent"  # under the results folder (a folder: `batch import DIR` skips it)


def run_log_dir(out_dir: Path, run_id: str) -> Path:
    return out_dir / SENT_DIR / run_id


class SentLog:
    """One actor's log, its own file (`actor-NODE-PID-RANDOM.log`), each line written whole
    by one unbuffered write."""

    def __init__(self, log_dir: Path, node: str = "local") -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        node = "".join(c for c in node if c.isalnum())[:16] or "local"
        path = log_dir / f"actor-{node}-{os.getpid()}-{uuid.uuid4().hex[:8]}.log"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def block(self, key: str) -> None:
        """A block of request lines started (`key`: the same on a re-run)."""
        os.write(self._fd, f"B\t{key}\n".encode())

    def sent(self, custom_id: str, server: int) -> None:
        os.write(self._fd, f"S\t{server}\t{custom_id}\n".encode())

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class SentCounts:
    """What the logs of a run say was sent."""

    sent: int = 0
    requests: int = 0
    sent_twice: int = 0  # requests sent more than once
    blocks_rerun: int = 0  # blocks started more than once
    per_server: dict[int, int] = field(default_factory=dict)
    per_node: dict[str, int] = field(default_factory=dict)  # requests sent by each node's actors


def _entries(log_dir: Path) -> Iterator[tuple[str, list[str]]]:
    """(node, fields) of each whole line of a run's logs (a killed actor's cut line left out)."""
    for path in sorted(log_dir.glob("actor-*.log")) if log_dir.is_dir() else []:
        node = path.name.split("-")[1]
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.endswith("\n"):
                    yield node, line[:-1].split("\t")


def sent_keys(log_dir: Path) -> set[str]:
    """The content keys of the requests a run's logs say were sent (whatever the export)."""
    sent = (fields for _, fields in _entries(log_dir) if fields[0] == "S" and len(fields) == 3)
    return {fields[2].split(":", 2)[-1] for fields in sent}


def sent_before(out_dir: Path, run_id: str) -> int:
    """How many requests of run `run_id` earlier runs into `out_dir` had sent already (paid
    twice across runs)."""
    runs = out_dir / SENT_DIR
    earlier: set[str] = set()
    for log_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        if log_dir.name != run_id:
            earlier |= sent_keys(log_dir)
    return len(sent_keys(run_log_dir(out_dir, run_id)) & earlier) if earlier else 0


def count_sent(log_dir: Path) -> SentCounts:
    """Count the logs of a run."""
    per_request: collections.Counter[str] = collections.Counter()
    blocks: collections.Counter[str] = collections.Counter()
    servers: collections.Counter[int] = collections.Counter()
    nodes: collections.Counter[str] = collections.Counter()
    for node, fields in _entries(log_dir):
        if fields[0] == "S" and len(fields) == 3:
            per_request[fields[2]] += 1
            servers[int(fields[1])] += 1
            nodes[node] += 1
        elif fields[0] == "B" and len(fields) == 2:
            blocks[fields[1]] += 1
    return SentCounts(
        sent=sum(per_request.values()),
        requests=len(per_request),
        sent_twice=sum(1 for n in per_request.values() if n > 1),
        blocks_rerun=sum(1 for n in blocks.values() if n > 1),
        per_server=dict(sorted(servers.items())),
        per_node=dict(sorted(nodes.items())),
    )
