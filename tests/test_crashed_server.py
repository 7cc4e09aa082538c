"""A server that dies mid-reply on the first request is told as a crash, not a wrong address.

The server here is a raw socket on 127.0.0.1: it answers 404 to GETs, and on the first POST it
closes the connection without a reply and stops listening, as a server that crashes does.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.store.store import Store
from tests.grade_data import write_grade_files

NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@pytest.fixture
def crashing_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A server that takes one request, closes it unanswered, and stops listening."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def crash() -> None:
        while True:
            conn, _ = listener.accept()
            head = conn.recv(65536)
            if head.startswith(b"GET"):  # what the client asks first (/v1/models): not served
                conn.sendall(NOT_FOUND)
                conn.close()
                continue
            listener.close()  # stops listening: the next connections are refused
            conn.close()  # mid-reply: nothing was sent back
            return

    thread = threading.Thread(target=crash, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1"
    thread.join(timeout=10)


def test_a_server_that_crashes_on_the_first_request_is_told_as_a_crash(
    tmp_path: Path, crashing_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=2)
    store = tmp_path / "s.db"
    args = files.args("--base-url", crashing_url, "--store", store, "--model", "m")
    assert main([*args, "--quiet", "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{crashing_url} stopped answering" in err
    assert "closed a connection in the middle of a request" in err
    assert "probably crashed: see its log" in err
    assert "connection refused" in err
    assert "Check the address" not in err
    assert "could not connect (connection refused" not in err.split("(the next")[0]
    with Store(store) as s:
        assert s.count() == 0  # nothing stored, none as failed
        causes = [str(c["error_message"]) for c in s.calls()]
    assert "connection dropped" in causes[0]
    assert all("connection refused" in c for c in causes[1:]) and len(causes) == 3
