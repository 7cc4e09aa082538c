"""`relgrade batch run --engine ray` on a real local Ray cluster (a head and a second node on
this host, `ray.cluster_utils.Cluster`) against two fake servers: export, run, import: every
pair's grade is the server's, a reply that is not JSON is an error line (not an abort), both
servers are used, a worker that dies has its block run again and said, and `grade` afterwards
sends nothing, and the actors run on both nodes. Recovery as users run it (issue 38, point 5):
a worker killed, or the driver killed mid-run (SIGKILL), then import, `batch close`, export
again, run, import: every pair graded once with the server's grade, and `grade` sends nothing.
Skipped where Ray is not installed (pip install -e ".[ray]")."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.batch.engines.ray_run import DIE_ONCE_ENV, SENT_DIR, count_sent, sent_keys
from grader.cli.main import main
from grader.store.store import Store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, cli_import, custom_ids
from tests.helpers.batch_run import ROOT, expected_grades, stored_grades, subprocess_env
from tests.helpers.judgments import stored_judgments

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


def _argv(db: Path, address: str, out: Path, *urls: str, req: Path | None = None) -> list[str]:
    given = req or db.parent / "req"
    run = ["batch", "run", "--engine", "ray", "--store", str(db), str(given)]
    for url in urls:
        run += ["--base-url", url]
    return [*run, "--ray-address", address, "--out-dir", str(out), "--quiet"]


def _run(
    db: Path, address: str, out: Path, *urls: str, req: Path | None = None, actors: int = 0
) -> int:
    chosen = ["--actors", str(actors)] if actors else []  # 0: one per node
    return main([*_argv(db, address, out, *urls, req=req), "--concurrency", "8", *chosen])


def _per_node(out: Path) -> dict[str, int]:
    """Requests sent by each node's actors, from the run's logs under `out`."""
    (log_dir,) = (out / SENT_DIR).iterdir()
    return count_sent(log_dir).per_node


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
    assert "by 2 actors on 2 nodes" in err  # one actor per node of the cluster
    per_node = _per_node(out)
    assert len(per_node) == 2 and all(n > 0 for n in per_node.values()), per_node
    assert sorted(p.name for p in out.glob("*.jsonl")) == sorted(
        f"{p.stem}.results.jsonl" for p in requests
    )
    lines = _results(out)
    assert len(lines) == 20 and len({x["custom_id"] for x in lines}) == 20
    (bad,) = [x for x in lines if x["error"]]
    assert bad["error"]["code"] == "invalid_reply"

    assert cli_import(db, out) == 1  # the error line is stored failed, never a grade
    with Store(db) as store:
        (failed,) = list(stored_judgments(store, status="failed"))
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


def _close_export_run_import(
    db: Path,
    address: str,
    server: FakeServer,
    files: GradeFiles,
    export_id: str,
    left: int,
    actors: int = 0,
) -> None:
    """`batch close` of `export_id` (`left` lines without a result), export again (exactly
    those), run into the same results folder (`actors`: --actors), import it."""
    assert main(["batch", "close", "--store", str(db), export_id]) == 0
    again = cli_export(files, db, db.parent / "req2")
    assert sum(len(custom_ids(p)) for p in again) == left
    out = db.parent / "res"
    assert _run(db, address, out, server.base_url, req=db.parent / "req2", actors=actors) == 0
    assert cli_import(db, out) == 0


def _graded_once(db: Path, requests: list[Path], pairs: int) -> None:
    with Store(db) as store:
        assert store.count() == pairs  # one judgment per pair, none twice
    assert stored_grades(db) == expected_grades(requests)


def test_a_worker_killed_then_close_export_run_import(
    cluster: tuple[str, Path],
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Export; run (a worker dies: its block is run again, paid twice and said) on the first
    request file, the engine gone before the others; import; close; export again: exactly the
    12 unanswered pairs; run; import: every pair graded once, `grade` sends nothing."""
    address, marker = cluster
    marker.unlink(missing_ok=True)
    files = write_grade_files(tmp_path, n_queries=4, depth=5)
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "8")
    capsys.readouterr()
    assert _run(db, address, tmp_path / "res", fake_server.base_url, req=requests[0]) == 0
    err = capsys.readouterr().err
    assert marker.exists()
    twice = fake_server.counts["requests"] - 8
    assert twice > 0
    assert f"{twice} requests were sent more than once (Ray retried 1 blocks)" in err
    assert cli_import(db, tmp_path / "res") == 0

    export_id = custom_ids(requests[0])[0].split(":")[1]
    capsys.readouterr()
    _close_export_run_import(db, address, fake_server, files, export_id, 12, actors=3)
    err = capsys.readouterr().err
    assert "by 3 actors on" in err  # --actors chosen
    assert f"closed export {export_id}: 12 requests without a results line stored" in err
    assert fake_server.counts["requests"] == 20 + twice  # the 12 once more, nothing else
    _graded_once(db, requests, 20)
    _sends_nothing(files, db, fake_server)


def _settled(server: FakeServer) -> None:
    """Wait until the server has had no new request for a second (at most 30 s)."""
    deadline, seen = time.monotonic() + 30, -1
    while seen != server.counts["requests"] and time.monotonic() < deadline:
        seen = server.counts["requests"]
        time.sleep(1.0)


def _results_lines(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in out.glob("*.jsonl")) if out.is_dir() else 0


def test_the_driver_killed_mid_run_then_close_export_run_import(
    cluster: tuple[str, Path],
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`relgrade batch run` killed (SIGKILL) with some answers written: import what was
    written, close, export again (exactly the pairs with no answer), run, import: every pair
    graded once with the server's grade, and `grade` sends nothing."""
    address, marker = cluster
    marker.touch()  # no worker dies here
    files = write_grade_files(tmp_path, n_queries=8, depth=5)
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "5")
    out = tmp_path / "res"
    fake_server.latency_ms = 200  # 40 requests, 2 in flight: the run lasts seconds
    argv = [sys.executable, "-m", "grader.cli.main"]
    argv += [*_argv(db, address, out, fake_server.base_url), "--concurrency", "2"]
    driver = subprocess.Popen(argv, cwd=ROOT, env=subprocess_env())
    try:
        deadline = time.monotonic() + 120
        while _results_lines(out) < 4 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        driver.send_signal(signal.SIGKILL)
    finally:
        assert driver.wait(timeout=30) == -signal.SIGKILL
        fake_server.latency_ms = 0
    written = _results_lines(out)
    assert 4 <= written < 40, written

    cli_import(db, out)  # what was written (a cut last line is left out)
    _settled(fake_server)  # the killed job's actors stopped (Ray ends a dead driver's workers)
    with Store(db) as store:
        answered = store.count()
        stored = {j.key for j in stored_judgments(store, status="ok")}
    assert answered >= 4
    (run_logs,) = (out / SENT_DIR).iterdir()
    # Sent by the killed run, its answer never written: the logs name them (a request cut off
    # as the driver died may never have been counted by the server, but it was sent).
    paid = len(sent_keys(run_logs) - stored)
    export_id = custom_ids(requests[0])[0].split(":")[1]
    sent_before = fake_server.counts["requests"]
    capsys.readouterr()
    _close_export_run_import(db, address, fake_server, files, export_id, 40 - answered)
    assert fake_server.counts["requests"] == sent_before + 40 - answered
    err = capsys.readouterr().err
    if paid:
        assert f"{paid} requests had been sent by an earlier run into {out}" in err
    else:
        assert "had been sent by an earlier run" not in err
    _graded_once(db, requests, 40)
    _sends_nothing(files, db, fake_server)


def test_ctrl_c_leaves_what_was_written_importable_and_a_rerun_completes(
    cluster: tuple[str, Path],
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`relgrade batch run` stopped by Ctrl-C (SIGINT) with some answers written: exit 130,
    the lines written import, and the same `batch run` again then `batch import` grade every
    pair once with the server's grade (what the first run answered is paid twice, and said)."""
    address, marker = cluster
    marker.touch()  # no worker dies here
    files = write_grade_files(tmp_path, n_queries=8, depth=5)
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "req", "--batch-max-requests", "5")
    out = tmp_path / "res"
    fake_server.latency_ms = 500  # 40 requests, 2 in flight: the run lasts 10 s and more
    argv = [sys.executable, "-m", "grader.cli.main"]
    argv += [*_argv(db, address, out, fake_server.base_url), "--concurrency", "2"]
    driver = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=subprocess_env(),
        stderr=subprocess.PIPE,
        # As from a terminal: a suite started in the background (`cmd &`) ignores SIGINT, and
        # its children would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while _results_lines(out) < 4 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        driver.send_signal(signal.SIGINT)
        _, err = driver.communicate(timeout=120)
    finally:
        driver.kill()
        fake_server.latency_ms = 0
    if driver.returncode == 0:  # Ray wrote its lines only as the run ended: Ctrl-C came late
        assert _results_lines(out) == 40 and "40 of 40 requests answered" in err.decode()
        pytest.skip("the run wrote its lines only as it ended: Ctrl-C came too late to test")
    assert driver.returncode == 130, err.decode()
    assert "interrupted: " in err.decode()
    written = _results_lines(out)
    assert 4 <= written < 40, written
    assert all(p.read_bytes().endswith(b"\n") for p in out.glob("*.jsonl"))  # whole lines

    assert cli_import(db, out) in (0, 1)  # 1: the rest of a file it touched is missing
    with Store(db) as store:
        assert len(list(stored_judgments(store, status="ok"))) == written
    _settled(fake_server)
    capsys.readouterr()
    assert _run(db, address, out, fake_server.base_url) == 0  # the same command again
    err_text = capsys.readouterr().err
    assert "requests had been sent by an earlier run into" in err_text
    assert cli_import(db, out) == 0
    _graded_once(db, requests, 40)
    _sends_nothing(files, db, fake_server)
