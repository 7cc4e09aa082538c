"""Batch API request files: one JSONL line per chat.completions request (`custom_id`: the content
key), split under the API's limits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from grader.errors import InputError

MAX_REQUESTS_PER_FILE = 50_000  # the Batch API's limits on one input file
MAX_BYTES_PER_FILE = 200 * 1024 * 1024

CHAT_ENDPOINT = "/v1/chat/completions"


def request_line(key: str, body: Mapping[str, Any], *, url: str = CHAT_ENDPOINT) -> bytes:
    """One input line (UTF-8, newline included) asking `url` with `body`, tagged with `key`."""
    record = {"custom_id": key, "method": "POST", "url": url, "body": body}
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def check_size(size: int, max_bytes: int) -> None:
    """InputError when a line of `size` bytes cannot fit any file."""
    if size > max_bytes:
        raise InputError(
            f"a request is {size} bytes, over the {max_bytes}-byte file limit",
            hint="lower the prompt's document budget or raise --batch-max-bytes",
        )


def split_requests(
    requests: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    max_requests: int = MAX_REQUESTS_PER_FILE,
    max_bytes: int = MAX_BYTES_PER_FILE,
) -> Iterator[tuple[list[str], bytes]]:
    """Group (key, body) requests into files of at most `max_requests` lines and `max_bytes`
    bytes, each its keys and JSONL content; a repeated key or a request over `max_bytes` is an
    InputError."""
    if max_requests < 1 or max_bytes < 1:
        raise InputError("batch limits must be positive", hint="check --batch-max-requests/bytes")
    seen: set[str] = set()
    keys: list[str] = []
    lines: list[bytes] = []
    size = 0
    for key, body in requests:
        if key in seen:
            raise InputError(
                f"request {key} appears twice", hint="deduplicate keys before batching"
            )
        seen.add(key)
        line = request_line(key, body)
        check_size(len(line), max_bytes)
        if keys and (len(keys) >= max_requests or size + len(line) > max_bytes):
            yield keys, b"".join(lines)
            keys, lines, size = [], [], 0
        keys.append(key)
        lines.append(line)
        size += len(line)
    if keys:
        yield keys, b"".join(lines)
