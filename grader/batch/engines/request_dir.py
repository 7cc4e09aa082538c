"""The request files `batch run` answers (a folder's `.jsonl` files, or one), each of an export
this store records, with the model it asked."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grader.batch.files.exports import ExportState, split_custom_id
from grader.batch.files.import_followup import jsonl_files
from grader.errors import InputError


@dataclass(frozen=True)
class RequestFile:
    """One request file: its absolute path, export, model and number of lines."""

    path: Path
    export_id: str
    model: str
    lines: int


def _first_request(path: Path) -> dict[str, object]:
    with path.open("rb") as fh:
        first = fh.readline()
    try:
        request = json.loads(first)
    except ValueError:
        request = None
    if not isinstance(request, dict):
        raise InputError("not a request file of `relgrade batch export`", path=path, line=1)
    return request


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def request_files(given: Path, state: ExportState) -> list[RequestFile]:
    """The request files in `given` (a folder: its `.jsonl` files in name order; or one file),
    each of an export this store records (InputError naming the first that is not)."""
    found = []
    for path in jsonl_files([given.resolve()], "request"):
        request = _first_request(path)
        ids = split_custom_id(request.get("custom_id"))
        config = state.config(ids[0]) if ids else None
        if ids is None or config is None:
            raise InputError(
                "a request file of no export of this store",
                path=path,
                hint="give the --store that `relgrade batch export` wrote to",
            )
        body = request.get("body")
        model = config.get("model") or (body.get("model") if isinstance(body, dict) else None)
        found.append(RequestFile(path, ids[0], str(model), _count_lines(path)))
    return found
