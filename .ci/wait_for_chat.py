"""Wait until an OpenAI-compatible server answers a real chat completion (a server that lists
its models may still be loading one, or crash on the first request), within a budget.

    python .ci/wait_for_chat.py URL BUDGET_SECONDS [SERVER_PID]

Exit 0 once a completion came back with a choice; 1 when the budget ran out or the server's
process (SERVER_PID, when given) exited. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():  # a crashed child its shell has not reaped yet is a zombie: dead
        return stat.read_text().rpartition(")")[2].split()[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process: it exists
        return True
    return True


def _post(url: str, body: dict[str, object], timeout: float) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return dict(json.loads(reply.read()))


def _model(base: str, timeout: float) -> str:
    with urllib.request.urlopen(base + "/models", timeout=timeout) as reply:
        return str(json.loads(reply.read())["data"][0]["id"])


def wait(base: str, budget: float, pid: int | None) -> bool:
    """Whether the server answered a one-token chat completion within `budget` seconds."""
    deadline = time.monotonic() + budget
    last = "no attempt"
    while time.monotonic() < deadline and _alive(pid):
        left = max(1.0, deadline - time.monotonic())
        try:
            body = {
                "model": _model(base, min(30.0, left)),
                "messages": [{"role": "user", "content": "Say OK."}],
                "max_tokens": 1,
                "temperature": 0,
            }
            reply = _post(base + "/chat/completions", body, left)
            if reply.get("choices"):
                return True
            last = f"a reply without choices: {str(reply)[:200]}"
        except (OSError, ValueError, KeyError, IndexError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1.0)
    state = "exited" if not _alive(pid) else f"gave no completion in {budget:g} s"
    print(f"the server {state}; last attempt: {last}", file=sys.stderr)
    return False


if __name__ == "__main__":
    pid = int(sys.argv[3]) if len(sys.argv) > 3 else None
    started = time.monotonic()
    ok = wait(sys.argv[1].rstrip("/"), float(sys.argv[2]), pid)
    if ok:
        print(f"  the server answered a chat completion after {time.monotonic() - started:.0f} s")
    sys.exit(0 if ok else 1)
