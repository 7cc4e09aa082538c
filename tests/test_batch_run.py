"""`relgrade batch run`: relgrade's request function against the fake server (a reply that is
not JSON is an error line, several servers all used), the results files and the sent logs, and
`--engine vllm`: the printed commands, and `--exec` with a stand-in `vllm` on PATH, two nodes
one of which is killed between files, then import. Ray itself: tests/test_batch_run_ray.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.batch.engines.ray_run import Requester, SentLog, Servers, count_sent
from grader.batch.engines.request_dir import ResultsWriter, trim_cut_line
from grader.cli.main import main
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, cli_import
from tests.helpers.batch_run import (
    expected_grades,
    stand_in_vllm,
    stored_grades,
    subprocess_env,
)


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=4, depth=5)


def _answer(urls: list[str], raws: list[str], log: SentLog | None = None) -> list[Any]:
    async def go() -> list[str]:
        requester = Requester(Servers(urls), 8, on_send=log.sent if log else None)
        try:
            return await requester.answer_all(raws)
        finally:
            await requester.aclose()

    return [json.loads(x) for x in asyncio.run(go())]


def test_request_function_error_lines_and_servers(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    (request,) = cli_export(files, tmp_path / "s.db", tmp_path / "req")
    raws = request.read_text().splitlines()
    with FakeServer() as other:
        fake_server.enqueue(faults.not_json_body(), faults.server_error(503))
        log = SentLog(tmp_path / "logs")
        lines = _answer([fake_server.base_url, other.base_url], raws, log)
        log.close()
        assert fake_server.counts["requests"] > 0 and other.counts["requests"] > 0
        sent = fake_server.counts["requests"] + other.counts["requests"]
    assert [x["custom_id"] for x in lines] == [json.loads(r)["custom_id"] for r in raws]
    errors = [x for x in lines if x["error"]]
    # The reply that is not JSON is an error line for its request; the 503 was asked again.
    assert [(e["error"]["code"], e["response"]["status_code"]) for e in errors] == [
        ("invalid_reply", 200)
    ]
    assert all(x["response"]["request_id"] for x in lines)
    assert sent == len(raws) + 1
    counts = count_sent(tmp_path / "logs")
    assert (counts.sent, counts.requests, counts.sent_twice) == (sent, len(raws), 1)
    assert sum(counts.per_server.values()) == sent and set(counts.per_server) == {0, 1}


def test_unreachable_server_is_an_error_line(tmp_path: Path) -> None:
    raw = json.dumps({"custom_id": "relgrade:e:k", "url": "/v1/chat/completions", "body": {}})
    (line,) = _answer(["http://127.0.0.1:9/v1"], [raw])
    assert line["error"]["code"] == "connection_error" and line["response"]["body"] is None


def test_results_lines_whole_and_a_cut_line_trimmed(tmp_path: Path) -> None:
    writer = ResultsWriter(tmp_path)
    writer.write("/x/requests-a-00001.jsonl", ['{"a": 1}', '{"a": 2}'])
    writer.close()
    path = tmp_path / "requests-a-00001.results.jsonl"
    with path.open("ab") as fh:
        fh.write(b'{"a": 3')  # killed while writing
    trim_cut_line(path)
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'
    again = ResultsWriter(tmp_path)
    again.write("/x/requests-a-00001.jsonl", ['{"a": 4}'])
    again.close()
    assert path.read_text().splitlines() == ['{"a": 1}', '{"a": 2}', '{"a": 4}']
    assert again.paths() == [path]


def test_a_results_line_given_twice_imports_once(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    (request,) = cli_export(files, db, tmp_path / "req")
    raws = request.read_text().splitlines()
    lines = [json.dumps(x) for x in _answer([fake_server.base_url], raws)]
    results = tmp_path / "res"
    results.mkdir()
    (results / "a.results.jsonl").write_text("\n".join(lines + lines[:5]) + "\n")
    capsys.readouterr()
    assert cli_import(db, results) == 0
    assert stored_grades(db) == expected_grades([request])
    assert len(stored_grades(db)) == len(raws)


def _run(*args: str | Path | int) -> int:
    return main(["batch", "run", *map(str, args)])


def test_vllm_commands_per_node(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "4")
    assert len(requests) == 5
    out = tmp_path / "res"
    capsys.readouterr()
    shares = []
    for node in (0, 1):
        assert _run("--engine", "vllm", "--store", db, tmp_path / "req", "--out-dir", out,
                    "--node", node, "--nodes", 2) == 0  # fmt: skip
        shares.append(capsys.readouterr().out.splitlines())
    expected = [
        f"vllm run-batch -i {p} -o {out / (p.stem + '.results.jsonl')} --model fake-model"
        for p in requests
    ]
    assert shares == [expected[0::2], expected[1::2]]
    assert _run("--engine", "vllm", "--store", db, tmp_path / "req", "--node", 2,
                "--nodes", 2) == 2  # fmt: skip


def test_vllm_exec_needs_vllm_on_path(
    files: GradeFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    db = tmp_path / "s.db"
    cli_export(files, db, tmp_path / "req")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert _run("--engine", "vllm", "--store", db, tmp_path / "req", "--exec") == 2
    assert "no `vllm` on PATH" in capsys.readouterr().err


def test_ray_missing_says_how_to_install(
    files: GradeFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    db = tmp_path / "s.db"
    cli_export(files, db, tmp_path / "req")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    url = "http://127.0.0.1:9/v1"
    assert _run("--engine", "ray", "--store", db, tmp_path / "req", "--base-url", url) == 2
    assert "pip install 'relgrade[ray]'" in capsys.readouterr().err


def test_actors_between_one_and_concurrency(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    cli_export(files, db, tmp_path / "req")
    ray: list[str | Path] = [
        "--engine",
        "ray",
        "--store",
        db,
        tmp_path / "req",
        "--base-url",
        "http://127.0.0.1:9",
    ]
    for actors in ("0", "9"):
        assert _run(*ray, "--concurrency", "8", "--actors", actors) == 2
        assert f"--actors {actors}: give 1 to --concurrency (8)" in capsys.readouterr().err


def test_base_package_never_imports_ray() -> None:
    code = "import grader.cli.main, grader.batch.engines.ray_run, sys; "
    code += "print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=subprocess_env(), check=True).stdout  # fmt: skip
    assert out.strip() == "False"


@pytest.mark.slow
def test_vllm_exec_two_nodes_one_killed_between_files(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "4")
    out, log = tmp_path / "res", tmp_path / "vllm.log"
    bin_dir = stand_in_vllm(tmp_path / "bin")
    env = subprocess_env(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        FAKE_VLLM_URL=fake_server.base_url,
        FAKE_VLLM_LOG=str(log),
        FAKE_VLLM_KILL_AFTER=requests[1].name,  # node 1 dies after its first file
    )

    def node(k: int) -> int:
        argv = [sys.executable, "-m", "grader.cli.main", "batch", "run", "--engine", "vllm"]
        argv += ["--store", str(db), str(tmp_path / "req"), "--out-dir", str(out)]
        argv += ["--node", str(k), "--nodes", "2", "--exec"]
        return subprocess.run(argv, env=env, capture_output=True, check=False).returncode

    assert node(0) == 0
    assert node(1) == -9  # killed between files: requests[3] was never started
    assert not (out / f"{requests[3].stem}.results.jsonl").exists()
    assert cli_import(db, out) == 0  # what came back; requests[3] was never run
    assert len(stored_grades(db)) == 16
    assert node(1) == 0  # the node restarted: its whole file is skipped, the rest is run
    ran = [line.split() for line in log.read_text().splitlines()]
    assert sorted(name for name, _ in ran) == sorted(p.name for p in requests)  # each once
    assert {model for _, model in ran} == {"fake-model"}
    assert cli_import(db, out) == 0
    assert stored_grades(db) == expected_grades(requests)
    fake_server.reset()
    grade = files.args("--store", db, "--base-url", fake_server.base_url, *MODEL, "--quiet")
    assert main([*grade, "--depth", "5"]) == 0
    assert fake_server.counts["requests"] == 0
