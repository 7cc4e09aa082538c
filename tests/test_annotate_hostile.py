"""The annotate server against a hostile or careless client, byte by byte on real sockets.

Malformed requests get a 4xx reply and the server keeps serving, with no traceback; a client
that announces more than it sends, or trickles, is cut by the socket timeout or the connection
deadline; idle connections do not pile up threads; a grade POST does not re-read the grade log.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from calibration.spotcheck.annotate.gradelog import GradeLog
from calibration.spotcheck.annotate.server import MAX_BODY, AnnotateServer
from calibration.spotcheck.blind import BlindItem
from grader.errors import InputError

ITEMS = [BlindItem("q1", f"d{i}", "a query", f"document {i}") for i in range(4)]
SCALE = [(0, ""), (1, ""), (2, ""), (3, "")]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AnnotateServer]:
    app = AnnotateServer(
        ITEMS,
        GradeLog(tmp_path / "s.ann.grades.jsonl", "ann"),
        SCALE,
        timeout=0.5,
        deadline=1.5,
        max_connections=8,
    )
    app.start()
    try:
        yield app
    finally:
        app.stop()


def _connect(app: AnnotateServer) -> socket.socket:
    return socket.create_connection(app.address, timeout=10)


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (the 10 s socket timeout fails the test)."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _exchange(app: AnnotateServer, data: bytes) -> tuple[int, bytes]:
    """Send raw bytes, read the reply to the end: (status, body)."""
    with _connect(app) as sock:
        sock.sendall(data)
        reply = _read_all(sock)
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _post(app: AnnotateServer, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    host = f"127.0.0.1:{app.address[1]}"
    lines = ["POST /api/grade HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    hdrs = {"Content-Length": str(len(body)), **(headers or {})}
    lines += [f"{k}: {v}" for k, v in hdrs.items() if v != "-"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _get_state(app: AnnotateServer) -> tuple[int, bytes]:
    host = f"127.0.0.1:{app.address[1]}"
    return _exchange(app, f"GET /api/state HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())


GOOD = b'{"query_id": "q1", "doc_id": "d0", "grade": 2}'
MALFORMED = {
    "length not a number": (GOOD, {"Content-Length": "abc"}),
    "length missing": (GOOD, {"Content-Length": "-"}),
    "length negative": (GOOD, {"Content-Length": "-5"}),
    "length signed": (GOOD, {"Content-Length": f"+{len(GOOD)}"}),
    "length zero": (b"", {}),
    "length huge": (GOOD, {"Content-Length": "99999999999"}),
    "length beyond any int": (GOOD, {"Content-Length": "9" * 400}),
    "length over the limit": (b"{" + b" " * MAX_BODY + b"}", {}),
    "two lengths": (GOOD, {"Content-length": "3"}),
    "chunked": (GOOD, {"Transfer-Encoding": "chunked"}),
    "not json": (b"grade=2", {}),
    "not utf-8": (b'{"query_id": "\xff\xfe"}', {}),
    "nested 2,000 deep": (b"[" * 2000 + b"]" * 2000, {}),
    "object nested 1,300 deep": (b'{"a":' * 1300 + b"1" + b"}" * 1300, {}),
    "ids nested 900 deep": (
        b'{"query_id": ' + b"[" * 900 + b"]" * 900 + b', "doc_id": "d0", "grade": 1}',
        {},
    ),
    "a list": (b"[1, 2]", {}),
    "a string": (b'"q1 d0 2"', {}),
    "a number": (b"2", {}),
    "null": (b"null", {}),
    "grade as a float": (b'{"query_id": "q1", "doc_id": "d0", "grade": 2.5}', {}),
    "grade NaN": (b'{"query_id": "q1", "doc_id": "d0", "grade": NaN}', {}),
    "ids as numbers": (b'{"query_id": 1, "doc_id": 0, "grade": 1}', {}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_post_gets_a_4xx_and_the_server_keeps_serving(
    server: AnnotateServer, case: str, capfd: pytest.CaptureFixture[str]
) -> None:
    body, headers = MALFORMED[case]
    status, reply = _exchange(server, _post(server, body, headers))
    assert status in (400, 411, 413), (status, reply)
    assert json.loads(reply)["error"]
    assert not server.log.path.exists()  # nothing was saved
    assert _get_state(server)[0] == 200
    assert _exchange(server, _post(server, GOOD))[0] == 200  # and grading still works
    err = capfd.readouterr().err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /api/state HTTP/x.y\r\n\r\n", 400),
        (b"GET /api/state HTTP/9.9\r\n\r\n", 505),  # HTTP's own code: version not supported
        (b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70000 + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(150)) + b"\r\n", 431),
        (b"GET /api/state HTTP/1.1\r\nHost: evil.example\r\n\r\n", 403),
        (b"POST /elsewhere HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 404),
        (b"DELETE /api/grade HTTP/1.1\r\n\r\n", 501),  # HTTP's own code: no such method
    ],
    ids=[
        "no method",
        "bad version",
        "future version",
        "long header",
        "150 headers",
        "foreign host",
        "bad path",
        "delete",
    ],
)
def test_malformed_request_lines_and_headers_get_an_error_reply(
    server: AnnotateServer, raw: bytes, expected: int, capfd: pytest.CaptureFixture[str]
) -> None:
    status, _ = _exchange(server, raw)
    assert status == expected
    assert _get_state(server)[0] == 200
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_a_body_shorter_than_its_length_ends_by_timeout(
    server: AnnotateServer, capfd: pytest.CaptureFixture[str]
) -> None:
    with _connect(server) as sock:
        sock.sendall(_post(server, GOOD, {"Content-Length": "100"}))  # 47 bytes of 100
        reply = _read_all(sock)  # ends: the server's 0.5 s timeout, not ours (10 s)
    assert reply.startswith(b"HTTP/1.0 408")
    assert not server.log.path.exists()
    assert _get_state(server)[0] == 200
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_headers_that_never_end_are_dropped_by_timeout(server: AnnotateServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST /api/grade HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert _read_all(sock) == b""  # closed without a reply


@pytest.mark.slow
def test_a_trickling_client_is_cut_at_the_connection_deadline(server: AnnotateServer) -> None:
    """A header byte every 0.2 s never trips the 0.5 s read timeout; the 1.5 s deadline ends it."""
    closed = threading.Event()
    with _connect(server) as sock:

        def watch() -> None:
            with contextlib.suppress(OSError):
                sock.recv(1)  # returns (b"") or fails (reset) once the server ends it
            closed.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        sent = 0
        sock.sendall(b"GET / HTTP/1.1\r\nX-Slow: ")
        while not closed.is_set() and sent < 200:  # 200 x 0.2 s = 40 s, far past the deadline
            try:
                sock.sendall(b"a")
            except OSError:
                break
            sent += 1
            time.sleep(0.2)
        watcher.join(timeout=10)
    assert closed.is_set() and sent < 200


@pytest.mark.slow
def test_300_idle_connections_hold_at_most_max_connections_threads(tmp_path: Path) -> None:
    app = AnnotateServer(
        ITEMS,
        GradeLog(tmp_path / "s.ann.grades.jsonl", "ann"),
        SCALE,
        timeout=30,
        max_connections=8,
    )
    app.start()
    before = threading.active_count()
    socks: list[socket.socket] = []
    try:
        for _ in range(300):
            socks.append(_connect(app))  # connect and say nothing
        # Connections are accepted in order; the first 8 get a thread each and wait for their
        # request, every later one is answered 503 at once and closed.
        busy = [_read_all(s) for s in socks[8:]]
        assert all(b.startswith(b"HTTP/1.0 503") and b"Retry-After: 1" in b for b in busy)
        assert threading.active_count() - before <= 8
        for s in socks[:8]:
            s.settimeout(0.05)
            with pytest.raises(TimeoutError):
                s.recv(1)  # still held open, not refused
    finally:
        for s in socks:
            s.close()
    try:
        status = None
        deadline = time.monotonic() + 120  # the 8 threads see the closes and end; a slot frees
        while status != 200 and time.monotonic() < deadline:
            status = _get_state(app)[0]
            if status != 200:
                time.sleep(0.05)
        assert status == 200
    finally:
        app.stop()


def _fill_log(path: Path, n: int) -> None:
    """A grade log of n grades written at once (as `n` appends would leave it)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            rec = {"query_id": f"q{i % 997}", "doc_id": f"d{i}", "grade": i % 4, "annotator": "ann"}
            fh.write(json.dumps(rec) + "\n")


def _rchar() -> int:
    """Bytes this process has read through read(2)-like calls (files and sockets alike)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")
def test_a_grade_post_does_not_reread_a_20k_grade_log(tmp_path: Path) -> None:
    path = tmp_path / "s.ann.grades.jsonl"
    _fill_log(path, 20_000)
    size = path.stat().st_size
    log = GradeLog(path, "ann")
    app = AnnotateServer(ITEMS, log, SCALE)  # reads the log once, here
    assert log.bytes_read == size
    app.start()
    try:
        before_log, before_io = log.bytes_read, _rchar()
        graded = []
        for g in range(5):
            body = json.dumps({"query_id": "q1", "doc_id": f"d{g % 4}", "grade": g % 4})
            status, reply = _exchange(app, _post(app, body.encode()))
            assert status == 200 and json.loads(reply)["saved"] is True
            graded.append(json.loads(reply)["graded"])
        assert graded == [2, 2, 3, 4, 4]  # (q1, d1) was in the log already
        assert log.bytes_read == before_log  # nothing re-read
        assert _rchar() - before_io < 64 * 1024  # the process read far less than the 1.5 MB log
    finally:
        app.stop()
    assert size > 1_000_000
    assert len(path.read_text().splitlines()) == 20_005
    reopened = GradeLog(path, "ann").read()  # reopening resumes with every grade
    assert len(reopened) == 20_003 and reopened[("q1", "d0")] == 0  # 3 new pairs, d0 twice
    assert reopened == log.read()


def test_the_log_follows_appends_by_another_writer_reading_only_them(tmp_path: Path) -> None:
    path = tmp_path / "s.ann.grades.jsonl"
    mine, other = GradeLog(path, "ann"), GradeLog(path, "ann")
    mine.append("q1", "d0", 1)
    other.append("q1", "d1", 2)
    read_before = mine.bytes_read
    mine.append("q1", "d0", 3)  # catches up with the other writer's line first
    assert mine.bytes_read - read_before == len(path.read_bytes().splitlines(keepends=True)[1])
    assert mine.read() == {("q1", "d0"): 3, ("q1", "d1"): 2} == other.read()
    path.write_text("")  # the file replaced by a shorter one: read again from the start
    assert mine.read() == {}


def test_a_whole_unterminated_record_is_kept_and_a_corrupt_last_line_stops_appends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.ann.grades.jsonl"
    path.write_text('{"query_id": "q", "doc_id": "d1", "grade": 3}')  # saved but for its newline
    log = GradeLog(path, "ann")
    assert log.read() == {("q", "d1"): 3}
    log.append("q", "d2", 1)
    assert GradeLog(path, "ann").read() == {("q", "d1"): 3, ("q", "d2"): 1}
    with path.open("a") as fh:
        fh.write("edited by hand\n")
    assert log.read() == {("q", "d1"): 3, ("q", "d2"): 1}  # a bad last line is read as torn
    with pytest.raises(InputError, match=r"s\.ann\.grades\.jsonl:3: not a grade record"):
        log.append("q", "d3", 0)  # but nothing is written after it
    assert len(path.read_text().splitlines()) == 3


def test_a_client_that_resets_mid_reply_leaves_no_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    big = [BlindItem("q1", f"d{i}", "a query", "word " * 20_000) for i in range(50)]
    app = AnnotateServer(big, GradeLog(tmp_path / "s.ann.grades.jsonl", "ann"), SCALE)
    app.start()
    host = f"127.0.0.1:{app.address[1]}"
    try:
        for _ in range(10):
            sock = _connect(app)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(f"GET /api/state HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            time.sleep(0.02)  # the server starts writing its 5 MB reply
            sock.close()  # a reset, not a clean close
        assert _get_state(app)[0] == 200
    finally:
        app.stop()
    assert "Traceback" not in capfd.readouterr().err
