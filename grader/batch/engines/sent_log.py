"""What a `batch run --engine ray` sent, counted from logs the request actors append to: one
line per request sent (retries and re-run blocks included) and one per block started. Ray Data
runs a block again when a worker dies (at-least-once), so a request can be paid twice; these
logs say how many were."""

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
    """One actor's log (its own file: no two processes write the same one). Each line is
    written whole with one unbuffered write, so a killed actor leaves complete lines."""

    def __init__(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / f"actor-{os.getpid()}-{uuid.uuid4().hex[:8]}.log"
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


def count_sent(log_dir: Path) -> SentCounts:
    """Count the logs of a run (a cut last line, from a killed actor, is left out)."""
    per_request: collections.Counter[str] = collections.Counter()
    blocks: collections.Counter[str] = collections.Counter()
    servers: collections.Counter[int] = collections.Counter()
    for path in sorted(log_dir.glob("actor-*.log")) if log_dir.is_dir() else []:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    continue
                parts = line.rstrip("\n").split("\t")
                if parts[0] == "S" and len(parts) == 3:
                    per_request[parts[2]] += 1
                    servers[int(parts[1])] += 1
                elif parts[0] == "B" and len(parts) == 2:
                    blocks[parts[1]] += 1
    return SentCounts(
        sent=sum(per_request.values()),
        requests=len(per_request),
        sent_twice=sum(1 for n in per_request.values() if n > 1),
        blocks_rerun=sum(1 for n in blocks.values() if n > 1),
        per_server=dict(sorted(servers.items())),
    )
