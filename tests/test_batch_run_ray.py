"""`relgrade batch run --engine ray` on a real local Ray cluster (a head and a second node on
this host, `ray.cluster_utils.Cluster`) against two fake servers: export, run, import: every
pair's grade is the server's, a reply that is not JSON is an error line (not an abort), both
servers are used, a worker that dies has its block run again and said, and `grade` afterwards
sends nothing. Skipped where Ray is not installed (pip install -e ".[ray]")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.batch.engines.ray_run import DIE_ONCE_ENV
from grader.cli.main import main
from grader.store.store import Store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, cli_import
from tests.helpers.batch_run import expected_grades, stored_grades

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A head and a second node, one CPU each: (address, the file whose absence makes the
    first actor to answer a batch die once)."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    from ray.cluster_utils import Cluster

    marker = tmp_path_factory.mktemp("ray") / "died"
    mp = pytest.MonkeyPatch()
    mp.setenv(DIE_ONCE_ENV, str(marker))  # the nodes' workers inherit it
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster.address, marker
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
        mp.undo()


def _results(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for p in sorted(folder.glob("*.jsonl")) for x in p.open()]


def _run(db: Path, address: str, out: Path, *urls: str) -> int:
    run = ["batch", "run", "--engine", "ray", "--store", str(db), str(db.parent / "req")]
    for url in urls:
        run += ["--base-url", url]
    run += ["--ray-address", address, "--out-dir", str(out), "--concurrency", "8"]
    return main([*run, "--quiet"])


def _sends_nothing(files: GradeFiles, db: Path, server: FakeServer) -> None:
    server.reset()
    grade = files.args("--store", db, "--base-url", server.base_url, *MODEL, "--quiet")
    assert main([*grade, "--depth", "5"]) == 0
    assert server.counts["requests"] == 0


def test_export_run_import_on_two_nodes(
    cluster: tuple[str, Path],
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address, marker = cluster
    marker.touch()  # no actor dies in this run
    files = write_grade_files(tmp_path, n_queries=4, depth=5)
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "8")
    assert len(requests) == 3
    out = tmp_path / "res"
    with FakeServer() as other:
        other.enqueue(faults.not_json_body())  # one reply that is not JSON
        capsys.readouterr()
        assert _run(db, address, out, fake_server.base_url, other.base_url) == 1
        both = (fake_server.counts["requests"], other.counts["requests"])
    err = capsys.readouterr().err
    assert both[0] > 0 and both[1] > 0 and sum(both) == 20, both
    assert "20 of 20 requests answered (1 error lines) in 3 results files" in err
    assert "0 requests were sent more than once (Ray retried 0 blocks)" in err
    assert sorted(p.name for p in out.glob("*.jsonl")) == sorted(
        f"{p.stem}.results.jsonl" for p in requests
    )
    lines = _results(out)
    assert len(lines) == 20 and len({x["custom_id"] for x in lines}) == 20
    (bad,) = [x for x in lines if x["error"]]
    assert bad["error"]["code"] == "invalid_reply"

    assert cli_import(db, out) == 1  # the error line is stored failed, never a grade
    with Store(db) as store:
        (failed,) = list(store.iter_judgments(status="failed"))
    assert failed.error is not None and failed.error.type == "Batch:invalid_reply"
    expected = expected_grades(requests)
    assert stored_grades(db) == {k: g for k, g in expected.items() if k != failed.key}

    fake_server.reset()
    reask = ["batch", "import", "--store", str(db), str(out), "--reask", "--quiet"]
    assert main([*reask, "--base-url", fake_server.base_url]) == 0
    assert fake_server.counts["requests"] == 1
    assert stored_grades(db) == expected
    _sends_nothing(files, db, fake_server)


def test_a_worker_that_dies_is_paid_twice_and_said(
    cluster: tuple[str, Path],
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address, marker = cluster
    marker.unlink(missing_ok=True)  # the first actor to answer a batch dies after sending it
    files = write_grade_files(tmp_path, n_queries=4, depth=5)
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "8")
    out = tmp_path / "res"
    capsys.readouterr()
    assert _run(db, address, out, fake_server.base_url) == 0
    err = capsys.readouterr().err
    assert marker.exists()
    twice = fake_server.counts["requests"] - 20
    assert twice > 0
    assert f"{twice} requests were sent more than once (Ray retried 1 blocks)" in err
    assert cli_import(db, out) == 0
    assert stored_grades(db) == expected_grades(requests)  # exact whatever was retried
    _sends_nothing(files, db, fake_server)
