"""A fake OpenAI Batch API (/v1/files, /v1/batches) mounted on the fake chat server.

Each batch answers its input lines the way the fake chat endpoint would (`server.completion_for`),
without going through that endpoint (so `server.counts["requests"]` still counts live calls only).
Tests script each new batch with a `BatchPlan`, consumed in creation order:

    api = FakeBatchAPI(server)
    api.plan(BatchPlan(polls_in_progress=2, errors={1: (500, "server_error")}))
    ... a batch created now stays in_progress for 2 status checks, then completes with line 1
    (0-based) in the error file and every other line in the output file.

`expire_after=N` answers only the first N lines and sends the batch to `expired` (the rest go to
the error file with code `batch_expired`, as OpenAI does); `contents={i: text}` replaces the
message content of line i (e.g. an out-of-range grade); `status="failed"` fails validation.
"""

from __future__ import annotations

import collections
import json
import time
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakeserver import FakeServer, completion, os_random


@dataclass
class BatchPlan:
    """How the next created batch behaves."""

    polls_in_progress: int = 0
    status: str = "completed"
    expire_after: int | None = None
    errors: dict[int, tuple[int, str]] = field(default_factory=dict)
    contents: dict[int, str] = field(default_factory=dict)


def _id(prefix: str) -> str:
    return prefix + "-" + str(abs(hash(os_random())))[:16]


class FakeBatchAPI:
    """Files and batches kept in memory; see the module docstring."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.counts: collections.Counter[str] = collections.Counter()
        self._plans: collections.deque[BatchPlan] = collections.deque()
        self._batch_plans: dict[str, BatchPlan] = {}
        self.fail_next: collections.deque[int] = collections.deque()
        """HTTP statuses answered, one each, to the next /v1/files or /v1/batches requests."""
        self.fail_on: dict[str, collections.deque[int]] = collections.defaultdict(collections.deque)
        """Per operation (upload, create, list, retrieve, download): statuses for its next calls."""
        server.add_route("/v1/files", self._create_file, ["POST"])
        server.add_route("/v1/files/{file_id}/content", self._file_content, ["GET"])
        server.add_route("/v1/files/{file_id}", self._file, ["GET"])
        server.add_route("/v1/batches", self._batches, ["GET", "POST"])
        server.add_route("/v1/batches/{batch_id}", self._retrieve, ["GET"])
        server.add_route("/v1/batches/{batch_id}/cancel", self._cancel, ["POST"])

    def plan(self, *plans: BatchPlan) -> None:
        """Script the next created batches, in order (unscripted ones complete at once)."""
        self._plans.extend(plans)

    def reset(self) -> None:
        self.files.clear()
        self.contents.clear()
        self.batches.clear()
        self.counts.clear()
        self._plans.clear()
        self._batch_plans.clear()
        self.fail_next.clear()
        self.fail_on.clear()

    def input_lines(self, batch_id: str) -> list[dict[str, Any]]:
        """The parsed input lines of a batch."""
        data = self.contents[self.batches[batch_id]["input_file_id"]]
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    # -- files -----------------------------------------------------------------------------

    def _store_file(self, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        file_id = _id("file")
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.files[file_id] = obj
        self.contents[file_id] = data
        return obj

    def _fault(self, operation: str) -> Response | None:
        queue = self.fail_on[operation] if self.fail_on[operation] else self.fail_next
        if queue:
            self.counts["faults"] += 1
            return _error(queue.popleft(), f"scripted failure of {operation}")
        return None

    async def _create_file(self, request: Request) -> Response:
        if fault := self._fault("upload"):
            return fault
        self.counts["upload"] += 1
        raw = await request.body()
        header = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
        message = BytesParser(policy=default_policy).parsebytes(header + raw)
        fields: dict[str, Any] = {}
        filename = "upload.jsonl"
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if part.get_filename():
                filename = str(part.get_filename())
            fields[str(name)] = payload
        if fields.get("purpose", b"").decode() != "batch" or "file" not in fields:
            return _error(400, "expected a file with purpose 'batch'")
        return JSONResponse(self._store_file(filename, "batch", fields["file"]))

    async def _file(self, request: Request) -> Response:
        obj = self.files.get(request.path_params["file_id"])
        return JSONResponse(obj) if obj else _error(404, "No such file")

    async def _file_content(self, request: Request) -> Response:
        if fault := self._fault("download"):
            return fault
        self.counts["download"] += 1
        data = self.contents.get(request.path_params["file_id"])
        if data is None:
            return _error(404, "No such file")
        return Response(data, media_type="application/octet-stream")

    # -- batches ---------------------------------------------------------------------------

    async def _batches(self, request: Request) -> Response:
        if fault := self._fault("list" if request.method == "GET" else "create"):
            return fault
        if request.method == "GET":
            self.counts["list"] += 1
            data = sorted(self.batches.values(), key=lambda b: b["created_at"], reverse=True)
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                    "has_more": False,
                }
            )
        self.counts["create"] += 1
        body = await request.json()
        if body.get("completion_window") != "24h" or body.get("input_file_id") not in self.files:
            return _error(400, "bad batch request")
        batch_id = _id("batch")
        n = len([x for x in self.contents[body["input_file_id"]].splitlines() if x.strip()])
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": time.time_ns(),
            "request_counts": {"total": n, "completed": 0, "failed": 0},
            "metadata": body.get("metadata") or {},
        }
        self._batch_plans[batch_id] = self._plans.popleft() if self._plans else BatchPlan()
        return JSONResponse(self.batches[batch_id])

    async def _retrieve(self, request: Request) -> Response:
        if fault := self._fault("retrieve"):
            return fault
        self.counts["retrieve"] += 1
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No such batch")
        if batch["status"] in ("validating", "in_progress"):
            plan = self._batch_plans[batch["id"]]
            if plan.polls_in_progress > 0:
                plan.polls_in_progress -= 1
                batch["status"] = "in_progress"
            else:
                self._finish(batch, plan)
        return JSONResponse(batch)

    async def _cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No such batch")
        batch["status"] = "cancelled"
        return JSONResponse(batch)

    def _finish(self, batch: dict[str, Any], plan: BatchPlan) -> None:
        if plan.status == "failed":
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"code": "invalid", "message": "bad"}]}
            return
        out: list[str] = []
        err: list[str] = []
        for index, line in enumerate(self.input_lines(batch["id"])):
            custom_id = line["custom_id"]
            if plan.expire_after is not None and index >= plan.expire_after:
                err.append(_error_line(custom_id, None, "batch_expired", "not done in time"))
            elif index in plan.errors:
                status, code = plan.errors[index]
                err.append(_error_line(custom_id, status, code, f"scripted {code}"))
            else:
                body = line["body"]
                if index in plan.contents:
                    reply = completion(body, content=plan.contents[index])
                else:
                    reply = self.server.completion_for(body)
                out.append(
                    json.dumps(
                        {
                            "id": _id("batch_req"),
                            "custom_id": custom_id,
                            "response": {"status_code": 200, "request_id": "r", "body": reply},
                            "error": None,
                        }
                    )
                )
        batch["status"] = "expired" if plan.expire_after is not None else "completed"
        batch["request_counts"]["completed"] = len(out)
        batch["request_counts"]["failed"] = len(err)
        if out:
            data = ("\n".join(out) + "\n").encode()
            batch["output_file_id"] = self._store_file("out.jsonl", "batch_output", data)["id"]
        if err:
            data = ("\n".join(err) + "\n").encode()
            batch["error_file_id"] = self._store_file("err.jsonl", "batch_output", data)["id"]


def _error_line(custom_id: str, status: int | None, code: str, message: str) -> str:
    response = None
    if status is not None:
        response = {
            "status_code": status,
            "request_id": "r",
            "body": {"error": {"message": message, "type": "error", "code": code}},
        }
    error = {"code": code, "message": message} if status is None else None
    return json.dumps(
        {"id": _id("batch_req"), "custom_id": custom_id, "response": response, "error": error}
    )


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status)


def main(argv: list[str] | None = None) -> None:
    """Serve the fake chat endpoint with the fake Batch API (for trying `regrade --batch`)."""
    import argparse

    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server with Batch API.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--polls", type=int, default=1, help="status checks before done (1)")
    args = parser.parse_args(argv)
    server = FakeServer(port=args.port)
    api = FakeBatchAPI(server)
    api.plan(*(BatchPlan(polls_in_progress=args.polls) for _ in range(1000)))
    server.serve_forever()


if __name__ == "__main__":
    main()
