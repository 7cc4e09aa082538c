"""Leases on content keys in flight, so processes sharing one store pay for each key once. A lease
is released in the transaction storing its judgment, and taken over once its process is gone (on
this host) or not renewed for `LEASE_S` (on another)."""

from __future__ import annotations

import enum
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.models import Judgment
from grader.store.busy import is_busy, is_full, roll_back
from grader.store.judgment_rows import encode_key
from grader.store.reading import select_in

LEASE_S = 60.0  # a lease not renewed for this long is taken over (owner on another host, hung)
RENEW_S = 15.0  # how often a run renews its leases
POLL_S = 0.2  # how often a run looks again at keys another process holds
BUSY_TIMEOUT_S = 30.0

CLAIMS_TABLE = """CREATE TABLE claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT,
    host TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    expires_at REAL NOT NULL
)"""

# Lease every key of a JSON array in one statement (one step, whatever the number of keys).
_LEASE_ALL = """
INSERT OR REPLACE INTO claims (key, owner, pid, pid_start, host, claimed_at, expires_at)
SELECT value, ?, ?, ?, ?, ?, ? FROM json_each(?)
"""

# The JSON of each ok answer stored among keys; the lease on each key of a JSON array.
_STORED_OK = "SELECT key, judgment FROM judgment_rows WHERE status = 'ok' AND stored_key IN ({})"
_LEASES = """SELECT key, owner, pid, pid_start, host, expires_at FROM claims
WHERE key IN (SELECT value FROM json_each(?))"""


class Outcome(enum.Enum):
    """What claiming a key found."""

    CLAIMED = "claimed"  # this owner holds the lease: send the request
    HELD = "held"  # another live owner holds it: wait for its answer
    STORED = "stored"  # an ok answer is stored: use it, send nothing


@dataclass(frozen=True)
class Claim:
    """The outcome for one key, with the stored answer when it is `STORED`."""

    outcome: Outcome
    judgment: Judgment | None = None


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` (Linux /proc, clock ticks since boot); None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # After the ")" ending the command name: state is field 3, starttime field 22.
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return fields[19]


def pid_alive(pid: int, start: str | None) -> bool:
    """Whether process `pid` on this host is running and is the one that started at `start`."""
    try:
        os.kill(pid, 0)
    except PermissionError:  # running, as another user
        return True
    except OSError:
        return False
    now_start = _process_start(pid)
    if now_start is None:
        # A zombie (killed, not yet reaped) has a /proc entry in state Z: it holds nothing.
        return not os.path.exists(f"/proc/{pid}/stat")
    return start is None or now_start == start


_HOST = socket.gethostname()


def release_stored(conn: sqlite3.Connection, keys: Iterable[str]) -> None:
    """Release this process's leases on `keys` (call inside the transaction storing them)."""
    pid = os.getpid()
    conn.executemany(
        "DELETE FROM claims WHERE key = ? AND pid = ? AND host = ?",
        ((key, pid, _HOST) for key in keys),
    )


class ClaimBook:
    """One run's leases in the store at `path`, on a connection of its own (thread-safe)."""

    def __init__(self, path: str | Path, *, lease_s: float = LEASE_S) -> None:
        self.path = Path(path)
        self.lease_s = lease_s
        self.owner = secrets.token_hex(8)
        self.pid = os.getpid()
        self.pid_start = _process_start(self.pid)
        self.host = _HOST
        self.taken_over = 0  # leases of dead or expired owners this run took
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False
        )
        # As the store's own connections: a lease survives a killed process, and one that a
        # power cut loses belonged to a process that died with it (no fsync per claim).
        self._conn.execute("PRAGMA synchronous = NORMAL")

    def close(self) -> None:
        """Close the connection (release the leases first: `release_all`)."""
        with self._lock:
            self._conn.close()

    def _live(self, owner: str, pid: int, pid_start: str | None, host: str, expires: float) -> bool:
        if owner == self.owner:
            return False
        if host == self.host:
            # On this host a lease lives as long as its process: one that could not renew (the
            # store's lock held past the lease) may still store its answer, so it is not taken
            # over, paid twice (the run waits HOLD_WAIT_S at most).
            return pid_alive(pid, pid_start)
        return expires > time.time()  # on another host, only the expiry tells

    def claim_many(self, keys: Iterable[str]) -> dict[str, Claim]:
        """Claim each key not answered ok and not leased by another live owner (one
        transaction); see `Outcome`. Waits while another process holds the write lock."""
        keys = list(dict.fromkeys(keys))
        while True:
            try:
                return self._claim_many(keys)
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                time.sleep(POLL_S)

    def _claim_many(self, keys: list[str]) -> dict[str, Claim]:
        found: dict[str, Claim] = {}
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                stored = dict(select_in(conn, _STORED_OK, map(encode_key, keys)))
                rows = conn.execute(_LEASES, (json.dumps(keys),))
                leases = {row[0]: row[1:] for row in rows}  # (owner, pid, start, host, expiry)
                claimed: list[str] = []
                for key in keys:
                    lease = leases.get(key)
                    if key in stored:
                        found[key] = Claim(
                            Outcome.STORED, Judgment.model_validate_json(stored[key])
                        )
                    elif lease is not None and self._live(*lease):
                        found[key] = Claim(Outcome.HELD)
                    else:
                        if lease is not None and lease[0] != self.owner:
                            self.taken_over += 1
                        claimed.append(key)
                        found[key] = Claim(Outcome.CLAIMED)
                now = time.time()
                conn.execute(
                    _LEASE_ALL, (self.owner, self.pid, self.pid_start, self.host, now,
                                 now + self.lease_s, json.dumps(claimed)),
                )  # fmt: skip
                conn.execute("COMMIT")
            except BaseException as exc:
                roll_back(conn, exc, self.path, "leasing keys before sending them")
                raise
        return found

    def renew(self) -> int:
        """Push the expiry of every lease this owner holds; how many it holds (0 when the
        disk is full: on this host a lease lives as long as its process anyway)."""
        with self._lock:
            try:
                cursor = self._conn.execute(
                    "UPDATE claims SET expires_at = ? WHERE owner = ?",
                    (time.time() + self.lease_s, self.owner),
                )
            except sqlite3.OperationalError as exc:
                if not is_full(exc, self.path):
                    raise
                return 0
            return cursor.rowcount

    def release_all(self) -> bool:
        """Release every lease this owner still holds; False when the store stayed locked or its
        disk is full (a lease dies with its process or at its expiry anyway)."""
        with self._lock:
            try:
                self._conn.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) and not is_full(exc, self.path):
                    raise
                return False
        return True
