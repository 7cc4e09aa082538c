""".ci/wait_for_chat.py, which starts the real-server stage's tests only once the server answers a
chat completion: it returns at the first completion (the fake server, on a real socket), and
gives up at once when the server's process has exited, or at the end of its budget."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from tests.fakeserver import FakeServer

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "wait_for_chat.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wait_for_chat", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_server_that_answers_is_up(fake_server: FakeServer) -> None:
    assert _module().wait(fake_server.base_url.rstrip("/"), 60, None)
    body = fake_server.requests[-1]
    assert body["max_tokens"] == 1 and body["messages"][0]["role"] == "user"


def test_a_server_whose_process_exited_is_not_waited_for(fake_server: FakeServer) -> None:
    wait = _module().wait
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{child.pid}/stat")
    while stat.exists() and stat.read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.05)  # exited but not reaped: a zombie, as a crashed server under a shell
    assert not wait("http://127.0.0.1:9/v1", 600, child.pid)
    child.wait()  # reaped: no such process any more
    assert not wait("http://127.0.0.1:9/v1", 600, child.pid)
    assert fake_server.requests == []


def test_nothing_listening_ends_at_the_budget() -> None:
    assert not _module().wait("http://127.0.0.1:9/v1", 2, None)
