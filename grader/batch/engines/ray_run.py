"""`relgrade batch run --engine ray`: Ray Data reads the request files, actors answer their lines
(`Requester`: over several servers, least in flight first; a non-JSON reply, a server error or a
dropped connection is an error line, never a grade), and this process appends each answer to its
results file as it comes. Ray is imported only when a run starts. Ray is at-least-once: actors log
each request they send (`SentLog`; Ray runs a block again when a worker dies), so the run reports
how many were sent, and paid, more than once."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from grader.batch.engines.request_dir import ResultsWriter
from grader.batch.files.export_files import LineProgress, Progress
from grader.errors import InputError

INSTALL_HINT = "pip install 'relgrade[ray]'"
BLOCK_BYTES = 128 * 1024
# Tests only: a file path; the first actor to answer a batch while it does not exist creates it
# and exits before returning the answers (a worker that died: Ray runs the block again).
DIE_ONCE_ENV = "RELGRADE_TEST_RAY_DIE_ONCE"
SENT_DIR = ".sent"  # under the results folder (a folder: `batch import DIR` skips it)
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
ATTEMPTS = 3  # tries of a request with no answer, a 429 or a 5xx (each to the least busy server)


class Servers:
    """The servers requests go to: each request to the one with the fewest in flight (the
    first given on a tie), avoiding the one that just failed it when there is another."""

    def __init__(self, base_urls: Sequence[str]) -> None:
        if not base_urls:
            raise ValueError("no server")
        self.urls = [u.rstrip("/") for u in base_urls]
        self.in_flight = [0] * len(self.urls)

    def pick(self, avoid: int | None = None) -> int:
        """The index of the server to send the next request to."""
        choices = [i for i in range(len(self.urls)) if i != avoid] or [0]
        return min(choices, key=lambda i: (self.in_flight[i], i))


def result_line(
    custom_id: str, status: int, body: Any, error: dict[str, str] | None, request_id: str | None
) -> str:
    """One results line in run-batch's shape (`error` in the Batch API's {code, message})."""
    rid = request_id or f"relgrade-{uuid.uuid4().hex}"
    record = {
        "id": f"relgrade-{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": rid, "body": body},
        "error": error,
    }
    return json.dumps(record, ensure_ascii=False)


def reply_line(custom_id: str, reply: httpx2.Response) -> str:
    """The results line of an HTTP reply: its JSON body, or an error line when the body is
    not a JSON object (the first 500 characters of what came, as the message)."""
    rid = reply.headers.get("x-request-id")
    try:
        body = reply.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return result_line(custom_id, reply.status_code, body, None, rid)
    text = reply.text[:500]
    message = f"HTTP {reply.status_code}: the reply is not a JSON object: {text!r}"
    code = "invalid_reply" if reply.status_code == 200 else f"http_{reply.status_code}"
    return result_line(custom_id, reply.status_code, None, {"code": code, "message": message}, rid)


class Requester:
    """Sends request lines' bodies with at most `limit` in flight, over `servers`."""

    def __init__(
        self,
        servers: Servers,
        limit: int,
        *,
        timeout_s: float = 600.0,
        on_send: Callable[[str, int], None] | None = None,
    ) -> None:
        self.servers = servers
        self.limit = asyncio.Semaphore(limit)
        limits = httpx2.Limits(max_connections=limit, max_keepalive_connections=limit)
        self.client = httpx2.AsyncClient(timeout=timeout_s, limits=limits)
        self.on_send = on_send

    async def aclose(self) -> None:
        await self.client.aclose()

    async def answer_all(self, raw_lines: Sequence[str]) -> list[str]:
        """The results line of each request line, in order; all sent concurrently."""
        return list(await asyncio.gather(*(self.answer(raw) for raw in raw_lines)))

    async def answer(self, raw: str) -> str:
        """The results line of one request line (an error line when it cannot be answered)."""
        try:
            request = json.loads(raw)
            custom_id = str(request["custom_id"])
            body = request["body"]
            path = str(request.get("url") or "/v1/chat/completions")
        except (ValueError, KeyError, TypeError):
            return ""  # not a request line: nothing to answer (import never asked it)
        async with self.limit:
            return await self._send(custom_id, path, body)

    async def _send(self, custom_id: str, path: str, body: Any) -> str:
        route = path.removeprefix("/v1")
        failed: int | None = None
        line = ""
        for attempt in range(ATTEMPTS):
            i = self.servers.pick(avoid=failed)
            self.servers.in_flight[i] += 1
            if self.on_send is not None:
                self.on_send(custom_id, i)
            try:
                reply = await self.client.post(self.servers.urls[i] + route, json=body)
            except httpx2.HTTPError as exc:
                message = f"{type(exc).__name__}: {exc}"[:500]
                error = {"code": "connection_error", "message": message}
                line = result_line(custom_id, 0, None, error, None)
            else:
                line = reply_line(custom_id, reply)
                if reply.status_code not in RETRY_STATUSES:
                    return line
            finally:
                self.servers.in_flight[i] -= 1
            failed = i
            if attempt + 1 < ATTEMPTS:
                await asyncio.sleep(0.5 * 2**attempt)
        return line


def import_ray() -> Any:
    """The ray module, or InputError saying how to install it."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise InputError(
            f"--engine ray needs Ray Data, which is not installed ({exc})", hint=INSTALL_HINT
        ) from None
    return ray


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
    return len(sent_keys(runs / run_id) & earlier) if earlier else 0


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


class RequestActor:
    """A Ray Data actor: answers each batch of request lines, up to `limit` in flight, over
    `base_urls`, logging each request sent in `log_dir`."""

    def __init__(self, base_urls: list[str], limit: int, log_dir: str, timeout_s: float) -> None:
        import ray

        self.loop = asyncio.new_event_loop()
        self.log = SentLog(Path(log_dir), node=ray.get_runtime_context().get_node_id())
        self.servers = Servers(base_urls)
        self.limit, self.timeout_s = limit, timeout_s
        self.requester: Requester | None = None

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        lines = [str(x) for x in batch["text"]]
        paths = [str(x) for x in batch["path"]]
        if lines:
            self.log.block(f"{paths[0]}#{_custom_id_of(lines[0])}#{len(lines)}")
        answers = self.loop.run_until_complete(self._answer(lines))
        _die_once()
        kept = [(p, a) for p, a in zip(paths, answers, strict=True) if a]
        return {"path": [p for p, _ in kept], "line": [a for _, a in kept]}

    async def _answer(self, lines: list[str]) -> list[str]:
        if self.requester is None:  # made inside the loop it is used in
            self.requester = Requester(
                self.servers, self.limit, timeout_s=self.timeout_s, on_send=self.log.sent
            )
        return await self.requester.answer_all(lines)


def _die_once() -> None:
    marker = os.environ.get(DIE_ONCE_ENV)
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(1)


def _custom_id_of(raw: str) -> str:
    start = raw.find('"custom_id"')
    return raw[start : start + 120].split(",", 1)[0] if start >= 0 else raw[:60]


@dataclass
class RayRun:
    """What `batch run --engine ray` is asked to do."""

    request_files: list[Path]
    out_dir: Path
    base_urls: list[str]
    address: str | None = None
    concurrency: int = 64
    actors: int | None = None  # None: one per node of the cluster (`cluster_actors`)
    timeout_s: float = 600.0
    lines: int | None = None  # request lines in all (for progress)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    @property
    def log_dir(self) -> Path:
        return self.out_dir / SENT_DIR / self.run_id


@dataclass
class RayOutcome:
    """What a run wrote and what it sent."""

    written: int
    error_lines: int
    results: list[Path]
    sent: SentCounts
    actors: int = 0
    interrupted: bool = False
    sent_before: int = 0  # requests an earlier run into the same folder had sent already


def run_ray(run: RayRun, progress: Progress | None = None) -> RayOutcome:
    """Answer every line of the request files through Ray Data; results written as they come.
    A KeyboardInterrupt stops it with what was written kept (`RayOutcome.interrupted`)."""
    ray = import_ray()
    run.out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    ray.init(
        address=run.address,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        ignore_reinit_error=True,
    )
    writer = ResultsWriter(run.out_dir)
    errors, interrupted = 0, False
    actors = run.actors or cluster_actors(ray, run.concurrency)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # ours instead
        # Small blocks: answers reach the results files (and Ctrl-C keeps them) as they come,
        # and a block Ray runs again after a worker died re-sends few requests.
        ctx.target_max_block_size = BLOCK_BYTES
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        for path, lines in _results(ray, run, actors):
            writer.write(path, lines)
            errors += sum(1 for line in lines if '"error": null' not in line)
            if progress is not None:
                progress(LineProgress(writer.written, run.lines, time.monotonic() - started))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        writer.close()
        ray.shutdown()
    sent = count_sent(run.log_dir)
    before = sent_before(run.out_dir, run.run_id)
    return RayOutcome(writer.written, errors, writer.paths(), sent, actors, interrupted, before)


def cluster_actors(ray: Any, concurrency: int) -> int:
    """Request actors: one per live node, at least 2 (one's batch still has requests out while
    another's ends), at most `concurrency`."""
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    return max(1, min(concurrency, max(2, nodes)))


def _results(ray: Any, run: RayRun, actors: int) -> Any:
    """(request file, results lines) as the actors answer them."""
    per_actor = max(1, -(-run.concurrency // actors))
    # Reading lines and awaiting replies take little CPU: a quarter each, so that on nodes of
    # one CPU the reads still find room beside the actors.
    files = [str(p) for p in run.request_files]
    ds = ray.data.read_text(files, include_paths=True, num_cpus=0.25)
    answered = ds.map_batches(
        RequestActor,
        fn_constructor_kwargs={
            "base_urls": run.base_urls,
            "limit": per_actor,
            "log_dir": str(run.log_dir),
            "timeout_s": run.timeout_s,
        },
        batch_size=per_actor * 4,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=0.25,  # Ray Data spreads the actors over the nodes (its default: SPREAD)
    )
    for batch in answered.iter_batches(batch_size=None, batch_format="numpy"):
        by_file: dict[str, list[str]] = {}
        for path, line in zip(batch["path"], batch["line"], strict=True):
            by_file.setdefault(str(path), []).append(str(line))
        yield from by_file.items()


def check_paths(request_dir: Path, out_dir: Path, base_urls: Sequence[str]) -> None:
    """InputError unless the run has somewhere to read, write and send."""
    if not base_urls:
        raise InputError("--engine ray needs --base-url (one or more servers to send to)")
    if out_dir.resolve() == request_dir.resolve():
        raise InputError("--out-dir is the request folder", hint="give another folder")
