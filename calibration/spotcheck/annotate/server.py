"""The local grading page: a stdlib HTTP server (in a thread) serving one page and a JSON API,
each grade fsynced to the grade log before the reply. A hostile client gets 400/413, timeouts,
deadlines and past `max_connections` a 503, so it cannot hold threads."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
import threading
import time
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from calibration.spotcheck.annotate.gradelog import GradeLog
from calibration.spotcheck.blind import BlindItem
from calibration.spotcheck.stopping import LiveStopping
from grader.errors import RelgradeError
from grader.models import GRADES

STATIC_FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
MAX_BODY = 4096
_LENGTH = re.compile(r"[0-9]{1,12}")
_BUSY_BODY = b'{"error": "server busy: too many open connections, try again"}'
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nCache-Control: no-store\r\n"
    b"Content-Length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n" + _BUSY_BODY
)


def _static(name: str) -> bytes:
    return resources.files("calibration.spotcheck.annotate").joinpath("static", name).read_bytes()


class AnnotateServer:
    """Serves the grading page for `items` on host:port (0 picks a free port) in a thread."""

    def __init__(
        self,
        items: list[BlindItem],
        log: GradeLog,
        scale: list[tuple[int, str]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        title: str = "relgrade annotate",
        timeout: float = 10.0,
        max_connections: int = 32,
        deadline: float = 60.0,
        live: LiveStopping | None = None,
    ) -> None:
        self.items = items
        self.live = live
        self.log = log
        self.scale = scale
        self.title = title
        self._known = {(i.query_id, i.doc_id) for i in items}
        self._graded = self._known.intersection(log.read())
        self._graded_lock = threading.Lock()
        handler = type("Handler", (_AnnotateHandler,), {"app": self, "timeout": timeout})
        try:
            self._httpd = _BoundedHTTPServer((host, port), handler, max_connections, deadline)
        except OSError as exc:
            raise RelgradeError(f"cannot listen on {host}:{port}: {exc}") from None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) actually bound (the port is chosen by the OS when 0 was asked)."""
        addr: Any = self._httpd.server_address
        return str(addr[0]), int(addr[1])

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def start(self) -> str:
        """Start serving in a background thread; returns the page's URL."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def state(self) -> dict[str, Any]:
        """The page's data: items, this annotator's latest grades, the scale."""
        grades = self.log.read()
        with self._graded_lock:
            self._graded = self._known.intersection(grades)
        return {
            "title": self.title,
            "annotator": self.log.annotator,
            "items": [asdict(i) for i in self.items],
            "grades": {
                str(n): grades[(i.query_id, i.doc_id)]
                for n, i in enumerate(self.items)
                if (i.query_id, i.doc_id) in grades
            },
            "scale": [{"grade": g, "meaning": m} for g, m in self.scale],
            "live": None if self.live is None else self.live.figures(grades),
        }

    def grade(self, body: Any) -> dict[str, Any]:
        """Validate and save one grade; O(1) in the size of the sample and of the log, plus,
        with live figures, one pass over the graded prefix and the LLM grades."""
        if not isinstance(body, dict):
            raise ValueError("expected a JSON object")
        query_id, doc_id = body.get("query_id"), body.get("doc_id")
        if not isinstance(query_id, str) or not isinstance(doc_id, str):
            raise ValueError("query_id and doc_id must be strings")
        key = (query_id, doc_id)
        grade = body.get("grade")
        if key not in self._known:
            raise ValueError(f"pair {key} is not in this sample")
        if not isinstance(grade, int) or isinstance(grade, bool) or grade not in GRADES:
            raise ValueError("grade must be one of 0, 1, 2, 3")
        self.log.append(key[0], key[1], grade)
        with self._graded_lock:
            self._graded.add(key)
            graded = len(self._graded)
        reply: dict[str, Any] = {"saved": True, "graded": graded, "total": len(self.items)}
        if self.live is not None:
            reply["live"] = self.live.figures(self.log.read())
        return reply


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most `limit` at once; one more is answered 503 and closed."""

    daemon_threads = True
    request_queue_size = 1024  # a burst of connects waits to be accepted (or refused) at once

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limit: int,
        deadline: float,
    ) -> None:
        if limit < 1:
            raise ValueError("max_connections must be at least 1")
        self._slots = threading.BoundedSemaphore(limit)
        self._deadline = deadline
        self._open: dict[socket.socket, float] = {}  # connection -> when it must be over
        self._open_lock = threading.Lock()
        super().__init__(address, handler)

    def track(self, conn: socket.socket) -> None:
        """Give a connection being handled its deadline."""
        with self._open_lock:
            self._open[conn] = time.monotonic() + self._deadline

    def untrack(self, conn: socket.socket) -> None:
        with self._open_lock:
            self._open.pop(conn, None)

    def service_actions(self) -> None:
        """Between accepts (every poll interval): cut connections past their deadline."""
        now = time.monotonic()
        with self._open_lock:
            late = [c for c, end in self._open.items() if end < now]
            for conn in late:
                del self._open[conn]
        for conn in late:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # the blocked read returns; the thread ends

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away or timed out is no error of ours; anything else is shown."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _AnnotateHandler(BaseHTTPRequestHandler):
    """The page's routes for the server `app` (a subclass per server, with its `timeout` on
    every read and write of a connection)."""

    server_version = "relgrade-annotate"
    default_request_version = "HTTP/1.0"  # errors before the version is read get a status line
    app: AnnotateServer
    server: _BoundedHTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        self.server.untrack(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return  # the terminal shows the URL, not a line per request

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _host_ok(self) -> bool:
        bound, port = self.app.address
        if bound not in ("127.0.0.1", "::1", "localhost"):
            return True  # served on purpose to other machines (--host): no name to pin
        host = self.headers.get("Host", "")
        allowed = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"{bound}:{port}"}
        return host in allowed

    def do_GET(self) -> None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
            return
        path = self.path.split("?", 1)[0]
        if path == "/":
            self._send(HTTPStatus.OK, _static("index.html"), "text/html")
        elif path.startswith("/static/") and path[8:] in STATIC_FILES:
            name = path[8:]
            self._send(HTTPStatus.OK, _static(name), STATIC_FILES[name])
        elif path == "/api/state":
            try:
                self._json(HTTPStatus.OK, self.app.state())
            except RelgradeError as exc:
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/api/grade":
            self._refuse(HTTPStatus.NOT_FOUND, "not found")
            return
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if not self._host_ok() or ctype != "application/json":
            self._refuse(HTTPStatus.FORBIDDEN, "JSON from this page only")
            return
        length = self._body_length()
        if length is None:
            return
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            self._refuse(HTTPStatus.REQUEST_TIMEOUT, "the body did not come in time")
            return
        if len(raw) < length:
            self.close_connection = True
            return  # the client closed before sending its body: nobody to answer
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "the body is not valid JSON"})
            return
        try:
            reply = self.app.grade(body)
        except (ValueError, RelgradeError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except OSError as exc:
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"not saved: {exc}"})
            return
        self._json(HTTPStatus.OK, reply)

    def _body_length(self) -> int | None:
        """The body's length from Content-Length, or None once a refusal was sent."""
        if self.headers.get("Transfer-Encoding") is not None:
            self._refuse(HTTPStatus.BAD_REQUEST, "send the body with a Content-Length")
            return None
        values = {v.strip() for v in self.headers.get_all("Content-Length") or []}
        if len(values) != 1:
            self._refuse(HTTPStatus.BAD_REQUEST, "expected one Content-Length")
            return None
        value = values.pop()
        if not _LENGTH.fullmatch(value) or int(value) == 0:
            self._refuse(HTTPStatus.BAD_REQUEST, "Content-Length must be a positive number")
            return None
        if int(value) > MAX_BODY:
            self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY} bytes")
            return None
        return int(value)

    def _refuse(self, status: int, error: str) -> None:
        """Answer a request whose body was not read, then close without resetting it."""
        self.close_connection = True
        try:
            self._json(status, {"error": error})
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            # Read what the client still sends (bounded) so that closing does not reset the
            # connection and destroy the reply before the client reads it.
            self.connection.settimeout(0.2)
            deadline = time.monotonic() + 1.0
            left = 1 << 16
            while left > 0 and time.monotonic() < deadline:
                chunk = self.connection.recv(min(left, 4096))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass
