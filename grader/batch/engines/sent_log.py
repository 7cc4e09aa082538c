"""What a `batch run --engine ray` sent, counted from logs its actors append to (a line per request
sent, a line per block started): Ray runs a block again when a worker dies, so a request can be
paid twice."""

from __future__ import annotations

import collections
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SENT_DIR = ".sent"
"""Under the results folder (a folder, so `batch import DIR` does not read the logs)."""


def run_log_dir(out_dir: Path, run_id: str) -> Path:
    """Where the actors of one run write their logs."""
    return out_dir / SENT_DIR / run_id


class SentLog:
    """One actor's log (its own file: no two processes write the same one), named after the
    node it runs on (`actor-NODE-PID-RANDOM.log`). Each line is written whole with one
    unbuffered write, so a killed actor leaves complete lines."""

    def __init__(self, log_dir: Path, node: str = "local") -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        node = "".join(c for c in node if c.isalnum())[:16] or "local"
        path = log_dir / f"actor-{node}-{os.getpid()}-{uuid.uuid4().hex[:8]}.log"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def block(self, key: str) -> None:
        """A block (a batch of request lines) started: `key` names it the same on a re-run."""
        os.write(self._fd, f"B\t{key}\n".encode())

    def sent(self, custom_id: str, server: int) -> None:
        """A request was sent to server number `server`."""
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


def sent_keys(log_dir: Path) -> set[str]:
    """The content keys of the requests a run's logs say were sent (whatever the export)."""
    keys = set()
    for path in sorted(log_dir.glob("actor-*.log")) if log_dir.is_dir() else []:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if line.endswith("\n") and parts[0] == "S" and len(parts) == 3:
                    keys.add(parts[2].split(":", 2)[-1])
    return keys


def sent_before(out_dir: Path, run_id: str) -> int:
    """How many requests of run `run_id` earlier runs into `out_dir` had sent already (a
    driver killed, its pairs closed and exported again): paid twice across runs."""
    runs = out_dir / SENT_DIR
    earlier: set[str] = set()
    for log_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        if log_dir.name != run_id:
            earlier |= sent_keys(log_dir)
    return len(sent_keys(run_log_dir(out_dir, run_id)) & earlier) if earlier else 0


def count_sent(log_dir: Path) -> SentCounts:
    """Count the logs of a run (a cut last line, from a killed actor, is left out)."""
    per_request: collections.Counter[str] = collections.Counter()
    blocks: collections.Counter[str] = collections.Counter()
    servers: collections.Counter[int] = collections.Counter()
    nodes: collections.Counter[str] = collections.Counter()
    for path in sorted(log_dir.glob("actor-*.log")) if log_dir.is_dir() else []:
        node = path.name.split("-")[1]
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    continue
                parts = line.rstrip("\n").split("\t")
                if parts[0] == "S" and len(parts) == 3:
                    per_request[parts[2]] += 1
                    servers[int(parts[1])] += 1
                    nodes[node] += 1
                elif parts[0] == "B" and len(parts) == 2:
                    blocks[parts[1]] += 1
    return SentCounts(
        sent=sum(per_request.values()),
        requests=len(per_request),
        sent_twice=sum(1 for n in per_request.values() if n > 1),
        blocks_rerun=sum(1 for n in blocks.values() if n > 1),
        per_server=dict(sorted(servers.items())),
        per_node=dict(sorted(nodes.items())),
    )
