"""The local grading page: a stdlib HTTP server (in a thread) serving one page and a JSON API.

The standard library's ThreadingHTTPServer is enough for one person on 127.0.0.1 and adds no
runtime dependency. Routes:

- `GET /` the page, `GET /static/<file>` its script and style (no external URL, no CDN);
- `GET /api/state` items (ids, query, document, title, path), this annotator's grades so far
  and the scale;
- `POST /api/grade` `{"query_id", "doc_id", "grade"}`: appended to the grade log (fsynced)
  before the reply, so a saved grade is on disk.

Documents are untrusted: the page puts them in the DOM with textContent only, and every
response carries a Content-Security-Policy that allows no inline script. POSTs must be JSON and
carry this server's Host, so another web page in the browser cannot post grades to it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from calibration.spotcheck.annotate.gradelog import GradeLog
from grader.errors import RelgradeError

STATIC_FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
MAX_BODY = 4096


@dataclass(frozen=True)
class AnnotateItem:
    """One pair to grade, as the page shows it."""

    query_id: str
    doc_id: str
    query: str
    document: str
    title: str | None = None
    path: str | None = None


def _static(name: str) -> bytes:
    return resources.files("calibration.spotcheck.annotate").joinpath("static", name).read_bytes()


class AnnotateServer:
    """Serves the grading page for `items` on host:port (0 picks a free port) in a thread."""

    def __init__(
        self,
        items: list[AnnotateItem],
        log: GradeLog,
        scale: list[tuple[int, str]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        title: str = "relgrade annotate",
    ) -> None:
        self.items = items
        self.log = log
        self.scale = scale
        self.title = title
        self._known = {(i.query_id, i.doc_id) for i in items}
        handler = _make_handler(self)
        try:
            self._httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise RelgradeError(f"cannot listen on {host}:{port}: {exc}") from None
        self._httpd.daemon_threads = True
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
        grades = self.log.read()
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
        }

    def grade(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ValueError("expected a JSON object")
        key = (str(body.get("query_id")), str(body.get("doc_id")))
        grade = body.get("grade")
        if key not in self._known:
            raise ValueError(f"pair {key} is not in this sample")
        if not isinstance(grade, int) or isinstance(grade, bool) or not 0 <= grade <= 3:
            raise ValueError("grade must be one of 0, 1, 2, 3")
        self.log.append(key[0], key[1], grade)
        graded = len(self._known.intersection(self.log.read()))
        return {"saved": True, "graded": graded, "total": len(self.items)}


def _make_handler(app: AnnotateServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "relgrade-annotate"

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
            bound, port = app.address
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
                    self._json(HTTPStatus.OK, app.state())
                except RelgradeError as exc:
                    self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/api/grade":
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
                return
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
            if not self._host_ok() or ctype != "application/json":
                self._json(HTTPStatus.FORBIDDEN, {"error": "JSON from this page only"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self._json(HTTPStatus.BAD_REQUEST, {"error": "bad body length"})
                return
            try:
                body = json.loads(self.rfile.read(length))
                reply = app.grade(body)
            except (ValueError, RelgradeError) as exc:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
                return
            except OSError as exc:
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"not saved: {exc}"})
                return
            self._json(HTTPStatus.OK, reply)

    return Handler
