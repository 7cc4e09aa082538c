"""Opt-in: the Label Studio round trip against a real Label Studio server (marker `labelstudio`).

Runs only with `pytest -m labelstudio` and RELGRADE_LABELSTUDIO_URL (e.g. http://127.0.0.1:8080)
and RELGRADE_LABELSTUDIO_TOKEN (a legacy API token, or a personal access token) set; see the "Label
Studio" section of docs/calibrate-and-spot-checks.md for installing and starting one from PyPI. The
test makes a project from relgrade's labeling config, imports the sample's tasks, posts annotations
through the API (two people, one person twice, a skipped task, an untouched one), exports JSON,
JSON_MIN, CSV and TSV and imports each with `relgrade sample --import`; it deletes its project at
the end.
"""

from __future__ import annotations

import csv
import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import population

pytestmark = pytest.mark.labelstudio

URL = os.environ.get("RELGRADE_LABELSTUDIO_URL", "").rstrip("/")
TOKEN = os.environ.get("RELGRADE_LABELSTUDIO_TOKEN", "")


class Server:
    """A thin client of Label Studio's REST API (urllib: no extra dependency)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.auth = f"Token {token}"
        if token.count(".") == 2:  # a personal access token (JWT): trade it for an access token
            access = self.call("POST", "/api/token/refresh", {"refresh": token}, auth=False)
            self.auth = f"Bearer {access['access']}"

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        data = self.raw(method, path, body, auth=auth)
        return json.loads(data) if data else None

    def raw(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> str:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = self.auth
        payload = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, payload, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return str(reply.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from None


@pytest.fixture
def server() -> Server:
    if not (URL and TOKEN):
        pytest.skip("set RELGRADE_LABELSTUDIO_URL and RELGRADE_LABELSTUDIO_TOKEN")
    return Server(URL, TOKEN)


@pytest.fixture
def project(server: Server, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A project made from relgrade's config and tasks of an 8-pair sample; deleted afterwards."""
    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, population({0: 8, 1: 4, 2: 4, 3: 4}, queries=2))
    queries = tmp_path / "q.tsv"
    queries.write_text("q0\tparse a url\nq1\tretry a request\n")
    docs = tmp_path / "d.jsonl"
    body = "def parse(url):\n    scheme, rest = url.split('://', 1)\n    return scheme, rest"
    docs.write_text(
        "".join(json.dumps({"doc_id": f"d{i}", "text": body}) + "\n" for i in range(20))
    )
    argv = ["sample", "--judgments", str(judgments), "--n", "8", "--strategy", "uniform"]
    argv += ["--queries", str(queries), "--docs", str(docs), "--prompt", "code"]
    argv += ["--out", str(tmp_path / "sample.csv"), "--labelstudio", str(tmp_path / "tasks.json")]
    assert main(argv) == 0
    config = (tmp_path / "tasks.config.xml").read_text()
    made = server.call(
        "POST",
        "/api/projects",
        {"title": f"relgrade {uuid.uuid4().hex[:8]}", "label_config": config},
    )
    pid = int(made["id"])
    try:
        tasks = json.loads((tmp_path / "tasks.json").read_text())
        server.call("POST", f"/api/projects/{pid}/import", tasks)
        yield pid, tmp_path
    finally:
        server.raw("DELETE", f"/api/projects/{pid}/")


def _grades(path: Path) -> dict[tuple[str, str], int]:
    with path.open(newline="") as fh:
        return {(r["query_id"], r["doc_id"]): int(r["grade"]) for r in csv.DictReader(fh)}


def test_exports_of_a_real_server_import_with_the_posted_grades(
    server: Server, project: tuple[int, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pid, tmp_path = project
    stored = server.call("GET", f"/api/projects/{pid}")["label_config"]
    assert 'hotkey="2"' in stored and "white-space: pre-wrap" in stored
    listed = server.call("GET", f"/api/tasks?project={pid}&page_size=100")
    tasks = listed["tasks"] if isinstance(listed, dict) else listed
    keys = [(t["data"]["query_id"], t["data"]["doc_id"]) for t in tasks]
    assert "    scheme, rest" in tasks[0]["data"]["document"]  # indentation kept
    task_id = {k: t["id"] for k, t in zip(keys, tasks, strict=True)}
    me = int(server.call("GET", "/api/current-user/whoami")["id"])
    email = f"relgrade-{uuid.uuid4().hex[:8]}@example.org"
    other = int(server.call("POST", "/api/users/", {"email": email, "username": email})["id"])

    def annotate(key: tuple[str, str], grade: int | None, who: int = me) -> None:
        result = [] if grade is None else [
            {"from_name": "grade", "to_name": "document", "type": "choices",
             "value": {"choices": [str(grade)]}}
        ]  # fmt: skip
        body: dict[str, Any] = {"result": result, "was_cancelled": grade is None}
        if who != me:
            body["completed_by"] = who
        server.call("POST", f"/api/tasks/{task_id[key]}/annotations", body)

    k = keys
    annotate(k[0], 2)
    annotate(k[1], 0)
    annotate(k[1], 1, other)  # two people
    annotate(k[2], 1)
    annotate(k[2], 3)  # the same person again: the latest counts
    annotate(k[3], None)  # skipped
    annotate(k[5], 3, other)
    annotate(k[6], 1)
    annotate(k[7], 0)  # k[4]: nobody
    mine = {k[0]: 2, k[1]: 0, k[2]: 3, k[6]: 1, k[7]: 0}
    manifest = str(tmp_path / "sample.manifest.json")
    for fmt, suffix in [("JSON", "json"), ("JSON_MIN", "min.json"), ("CSV", "csv"), ("TSV", "tsv")]:
        export = tmp_path / f"export.{suffix}"
        export.write_text(server.raw("GET", f"/api/projects/{pid}/export?exportType={fmt}"))
        argv = ["sample", "--import", str(export), "--manifest", manifest]
        capsys.readouterr()
        assert main([*argv, "--out", str(tmp_path / "x.csv")]) == 2
        assert "graded by more than one person" in capsys.readouterr().err
        human = tmp_path / f"human-{fmt}.csv"
        code = main([*argv, "--out", str(human), "--annotator", str(me), "--allow-missing"])
        said = capsys.readouterr()
        assert code == 0, said.err
        assert _grades(human) == mine, fmt
        if fmt == "JSON":
            assert "graded 5, skipped 1, missing 2 of the 8 sampled pairs" in said.out
        else:
            assert "graded 5, missing or skipped 3 of the 8 sampled pairs" in said.out
        assert "1 pair(s) were graded more than once by the same person" in said.err
        bob = tmp_path / f"bob-{fmt}.csv"
        assert main([*argv, "--out", str(bob), "--annotator", str(other), "--allow-missing"]) == 0
        assert _grades(bob) == {k[1]: 1, k[5]: 3}
