"""The annotate server and grade log without a browser: API, durability, export, guards."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calibration.spotcheck.annotate.gradelog import GradeLog, grade_log_path
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import neutral_scale, prompt_scale, read_blind_csv
from grader.cli.main import main
from grader.errors import InputError, NotAJudgePrompt, RelgradeError
from grader.prompts import load_prompt
from tests.helpers.annotate_sample import write_sample


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[AnnotateServer, str, Path]]:
    sample = write_sample(tmp_path)
    items = read_blind_csv(sample)
    log = GradeLog(grade_log_path(sample, "ann"), "ann")
    server = AnnotateServer(
        list(items),
        log,
        prompt_scale("passage"),
    )
    url = server.start()
    try:
        yield server, url, sample
    finally:
        server.stop()


def _call(url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(url, data=data, headers={**hdrs, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_binds_loopback_and_serves_the_page_with_a_strict_csp(
    served: tuple[AnnotateServer, str, Path],
) -> None:
    _server, url, _ = served
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=5) as resp:
        page = resp.read().decode()
        assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    assert "http://" not in page and "https://" not in page  # no CDN, no external URL
    status, state = _call(url + "api/state")
    assert status == 200 and len(state["items"]) == 4 and state["grades"] == {}
    assert state["scale"][3]["meaning"].startswith("Perfectly relevant")


def test_a_grade_is_on_disk_when_the_reply_comes_and_the_latest_wins(
    served: tuple[AnnotateServer, str, Path],
) -> None:
    server, url, _ = served
    status, reply = _call(url + "api/grade", {"query_id": "q1", "doc_id": "d0", "grade": 2})
    assert status == 200 and reply == {"saved": True, "graded": 1, "total": 4}
    assert server.log.read() == {("q1", "d0"): 2}
    _call(url + "api/grade", {"query_id": "q1", "doc_id": "d0", "grade": 0})
    lines = server.log.path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[-1])["annotator"] == "ann"
    assert _call(url + "api/state")[1]["grades"] == {"0": 0}


@pytest.mark.parametrize(
    "body",
    [
        {"query_id": "q1", "doc_id": "d0", "grade": 4},
        {"query_id": "q1", "doc_id": "d0", "grade": "2"},
        {"query_id": "q1", "doc_id": "nope", "grade": 1},
    ],
)
def test_bad_grades_are_refused_and_not_logged(
    served: tuple[AnnotateServer, str, Path], body: dict[str, Any]
) -> None:
    server, url, _ = served
    status, reply = _call(url + "api/grade", body)
    assert status == 400 and reply["error"]
    assert not server.log.path.exists()


def test_posts_from_another_site_or_not_json_are_refused(
    served: tuple[AnnotateServer, str, Path],
) -> None:
    server, url, _ = served
    body = {"query_id": "q1", "doc_id": "d0", "grade": 1}
    assert _call(url + "api/grade", body, {"Host": "evil.example:80"})[0] == 403
    form = urllib.request.Request(url + "api/grade", data=b"grade=1", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(form, timeout=5)
    assert err.value.code == 403
    assert not server.log.path.exists()


def test_grade_log_survives_a_torn_last_line(tmp_path: Path) -> None:
    log = GradeLog(tmp_path / "s.ann.grades.jsonl", "ann")
    log.append("q", "d1", 3)
    with log.path.open("a") as fh:
        fh.write('{"query_id": "q", "doc_')  # the process died mid-write
    assert log.read() == {("q", "d1"): 3}
    log.append("q", "d2", 1)
    assert log.read() == {("q", "d1"): 3, ("q", "d2"): 1}
    assert len(log.path.read_text().splitlines()) == 2


def test_grade_log_refuses_a_corrupt_middle_line_and_unsafe_names(tmp_path: Path) -> None:
    path = tmp_path / "s.ann.grades.jsonl"
    path.write_text('garbage\n{"query_id": "q", "doc_id": "d", "grade": 1}\n')
    with pytest.raises(InputError, match=r"s\.ann\.grades\.jsonl:1"):
        GradeLog(path, "ann").read()
    with pytest.raises(InputError, match="not usable in a file name"):
        grade_log_path(tmp_path / "s.csv", "../evil")


def test_neutral_scale_has_no_meanings() -> None:
    assert neutral_scale() == [(0, ""), (1, ""), (2, ""), (3, "")]


def test_a_lexical_sample_has_no_scale_and_is_not_told_to_grade_again() -> None:
    # A sample of lexical judgments names the prompt `lexical@1`: the lexical judge's settings.
    with pytest.raises(RelgradeError, match="lexical judge's settings, not an LLM prompt") as info:
        prompt_scale("lexical@1")
    assert "--judge lexical" not in str(info.value)
    with pytest.raises(NotAJudgePrompt, match="grade with --judge lexical"):
        load_prompt("lexical")  # `grade --prompt lexical` still says how to use it


def test_export_writes_one_annotators_grades_with_the_manifest_beside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = write_sample(tmp_path)
    a = GradeLog(grade_log_path(sample, "ann"), "ann")
    b = GradeLog(grade_log_path(sample, "bob"), "bob")
    a.append("q1", "d0", 3)
    a.append("q2", "d1", 1)
    a.append("q1", "d0", 2)
    b.append("q1", "d0", 0)
    out = tmp_path / "human_ann.csv"
    assert main(["annotate", str(sample), "--annotator", "ann", "--export", str(out)]) == 0
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["doc_id"], r["grade"], r["annotator"]) for r in rows] == [
        ("d0", "2", "ann"),
        ("d1", "1", "ann"),
    ]
    assert (tmp_path / "human_ann.manifest.json").exists()
    assert "2 item(s) are not graded yet" in capsys.readouterr().err
    out_b = tmp_path / "human_bob.csv"
    assert main(["annotate", str(sample), "--annotator", "bob", "--export", str(out_b)]) == 0
    assert "q1,d0,0,bob" in out_b.read_text()
    assert main(["annotate", str(sample), "--annotator", "cid", "--export", str(out_b)]) == 2


@pytest.mark.slow  # a fresh interpreter imports the whole CLI
def test_the_command_prints_a_loopback_url_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    sample = write_sample(tmp_path)
    argv = [sys.executable, "-m", "grader.cli.main", "annotate", str(sample)]
    argv += ["--annotator", "ann", "--no-browser"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal gives it: a suite started in the background by a shell without
        # job control has SIGINT ignored, and the command would inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("open "):
                break
        url = lines[-1].split()[1]
        assert url.startswith("http://127.0.0.1:")
        assert "0 of 4 graded so far" in "".join(lines)
        status, state = _call(url + "api/state")
        assert status == 200 and state["annotator"] == "ann"
        assert state["scale"][0]["meaning"].startswith("Irrelevant")  # from the manifest's prompt
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)  # a hang guard
        assert proc.returncode == 0 and "stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_annotators_compared_by_calibrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = write_sample(tmp_path)
    items = read_blind_csv(sample)
    for name, grades in (("ann", [0, 1, 2, 3]), ("bob", [0, 1, 2, 2])):
        log = GradeLog(grade_log_path(sample, name), name)
        for item, g in zip(items, grades, strict=True):
            log.append(item.query_id, item.doc_id, g)
    ann, bob = tmp_path / "ann.csv", tmp_path / "bob.qrels"
    assert main(["annotate", str(sample), "--annotator", "ann", "--export", str(ann)]) == 0
    assert main(["annotate", str(sample), "--annotator", "bob", "--export", str(bob)]) == 0
    assert bob.read_text().splitlines()[0] == f"{items[0].query_id} 0 {items[0].doc_id} 0"
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(bob), "--human", str(ann), "--format", "json"]
    assert main([*argv, "--bootstrap", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 4 and report["exact_agreement"] == pytest.approx(0.75)
    assert report["manifest"].endswith("ann.manifest.json")
