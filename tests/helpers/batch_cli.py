"""`relgrade batch export` and `batch import` run through the CLI on grade's test files, with
the fake engine answering over HTTP: what the batch file tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.cli.main import main
from tests import fake_engine
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles

MODEL = ["--model", "fake-model"]


def cli_export(files: GradeFiles, store: Path, out: Path, *extra: str) -> list[Path]:
    """`relgrade batch export` of the files' run into `out`: the request files, in order."""
    args = ["batch", "export", "--store", str(store), "--queries", str(files.queries)]
    args += ["--docs", str(files.docs), "--run", str(files.run), *MODEL, "--out-dir", str(out)]
    assert main([*args, "--quiet", *extra]) == 0
    return sorted(out.glob("requests-*.jsonl"))


def cli_import(db: Path, *results: Path | str) -> int:
    """`relgrade batch import --quiet` of `results`: its exit status."""
    return main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"])


def http_engine(server: FakeServer, requests: list[Path], out: Path, **kw: Any) -> list[Path]:
    """Each request file answered by the fake engine through `server` (`kw`: its faults)."""
    out.mkdir(exist_ok=True)
    results = []
    for path in requests:
        target = out / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, fake_engine.http_answer(server.base_url), **kw)
        results.append(target)
    return results


def custom_ids(path: Path) -> list[str]:
    """The custom_id of each line of a request or results file."""
    return [json.loads(line)["custom_id"] for line in path.read_text().splitlines()]


def with_a_copied_doc(data: GradeFiles) -> GradeFiles:
    """The files with a document repeating another's text under a new id, ranked in q0's run
    (one request, two id pairs)."""
    with data.docs.open("a") as fh:
        first = json.loads(data.docs.read_text().splitlines()[0])
        fh.write(json.dumps({**first, "doc_id": "d-copy"}) + "\n")
    with data.run.open("a") as fh:
        fh.write("q0 Q0 d-copy 6 1 bm25\n")
    return data
