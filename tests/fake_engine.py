"""A stand-in for an inference engine that reads OpenAI batch request files (vLLM run-batch):
each request line is answered through the fake OpenAI-compatible server (or, for large files, by
its reply function without HTTP), and the results are written in run-batch's output shape:

    {"id": "vllm-...", "custom_id": ..., "response": {"status_code", "request_id", "body"},
     "error": null}

An error is written as vLLM writes it: `response` with the status code and no body, `error` the
message (a string). `--fail-ids` makes those custom_ids error lines without asking (a request the
engine rejects), `--stop-after N` stops after N lines (a node that died) and `--truncate-last`
cuts the last written line in half with no newline (the engine killed while writing).

    python -m tests.fake_engine --base-url URL -i requests.jsonl -o results.jsonl
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any] | None, str | None]]
"""A request body -> (HTTP status, response body, error message)."""


def http_answer(base_url: str) -> Answer:
    """Answer through the server at `base_url` (POST /chat/completions)."""
    url = base_url.rstrip("/") + "/chat/completions"

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str | None]:
        request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), method="POST")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                data: dict[str, Any] = json.loads(reply.read())
                return 200, data, None
        except urllib.error.HTTPError as exc:
            return exc.code, None, exc.read().decode("utf-8", "replace")[:500]

    return answer


def result_line(
    custom_id: str, status: int, body: dict[str, Any] | None, error: str | None
) -> bytes:
    """One output line in vLLM run-batch's shape."""
    record = {
        "id": f"vllm-{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": {
            "status_code": status,
            "request_id": f"vllm-batch-{uuid.uuid4().hex}",
            "body": body,
        },
        "error": error,
    }
    return (json.dumps(record) + "\n").encode("utf-8")


def run_batch(
    input_path: Path,
    output_path: Path,
    answer: Answer,
    *,
    fail_ids: Iterable[str] = (),
    stop_after: int | None = None,
    truncate_last: bool = False,
) -> int:
    """Answer every request line of `input_path` into `output_path`; returns lines written."""
    failing = set(fail_ids)
    written = 0
    last = b""
    with input_path.open("rb") as src, output_path.open("wb") as out:
        for raw in src:
            if stop_after is not None and written >= stop_after:
                break
            request = json.loads(raw)
            cid = request["custom_id"]
            if cid in failing:
                line = result_line(cid, 400, None, "This model's maximum context length is 8192")
            else:
                line = result_line(cid, *answer(request["body"]))
            if last:
                out.write(last)
            last = line
            written += 1
        if last:
            out.write(last[: len(last) // 2] if truncate_last else last)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake batch inference engine (tests).")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("-i", "--input-file", required=True, type=Path)
    parser.add_argument("-o", "--output-file", required=True, type=Path)
    parser.add_argument("--fail-ids", nargs="*", default=[])
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--truncate-last", action="store_true")
    args = parser.parse_args(argv)
    run_batch(
        args.input_file,
        args.output_file,
        http_answer(args.base_url),
        fail_ids=args.fail_ids,
        stop_after=args.stop_after,
        truncate_last=args.truncate_last,
    )


if __name__ == "__main__":
    main()
