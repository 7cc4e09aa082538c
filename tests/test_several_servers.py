"""Several servers (issue 38, section 4): `grade --base-url A --base-url B` spreads the requests
over both fake servers on real sockets, counts each one's answers, survives one being stopped
mid-run (its pairs finish on the other, none paid twice), stops with exit 2 only when every
server is dead; the API's `base_url=[a, b]` does the same; a repeated single-value flag is an
error, never silently the last one."""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import relgrade as rg
from grader.cli.flags import StoreOnce
from grader.cli.main import build_parser, main
from grader.errors import RelgradeWarning
from grader.judges.llm.judge import LLMJudge
from grader.store.store import Store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.judgments import stored_judgments


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    with FakeServer(latency_ms=5) as a, FakeServer(latency_ms=5) as b:
        yield [a, b]


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=6, depth=10)  # 60 pairs


def _stored(store: Path) -> list[tuple[str, int | None]]:
    with Store(store) as s:
        return [(j.status, j.grade) for j in stored_judgments(s)]


def _grade(files: GradeFiles, store: Path, *urls: str, extra: tuple[str, ...] = ()) -> list[str]:
    args = files.args("--store", store, "--concurrency", "4", "--model", "fake-model", *extra)
    for url in urls:
        args += ["--base-url", url]
    return args


@pytest.mark.usefixtures("env")
def test_two_servers_share_the_pairs_and_the_summary_counts_each(
    servers: list[FakeServer], files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = servers
    store = tmp_path / "s.db"
    code = main(_grade(files, store, a.base_url, b.base_url, extra=("--quiet",)))
    err = capsys.readouterr().err
    assert code == 0, err
    ok_a, ok_b = a.counts["ok"], b.counts["ok"]
    assert ok_a + ok_b == files.n_pairs == a.counts["requests"] + b.counts["requests"]
    assert min(ok_a, ok_b) >= files.n_pairs // 4, (ok_a, ok_b)  # both used, roughly balanced
    url_a, url_b = a.base_url.rstrip("/"), b.base_url.rstrip("/")
    assert f"answers: {url_a} {ok_a}, {url_b} {ok_b}" in err
    stored = _stored(store)
    assert len(stored) == files.n_pairs and all(s == "ok" for s, _ in stored)
    # the store's key does not name the server: one server alone finds every answer stored
    code = main(_grade(files, store, a.base_url, extra=("--quiet",)))
    err = capsys.readouterr().err
    assert code == 0, err
    assert a.counts["requests"] == ok_a
    assert "answers:" not in err  # one server: today's summary


@pytest.mark.usefixtures("env")
def test_regrade_spreads_over_the_servers_too(
    servers: list[FakeServer], files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = servers
    store = tmp_path / "s.db"
    assert main(_grade(files, store, a.base_url, extra=("--quiet",))) == 0
    a.reset()
    argv = ["regrade", "--store", str(store), "--model", "model-b", "--quiet", "--format", "json"]
    argv += ["--base-url", a.base_url, "--base-url", b.base_url]
    assert main(argv) == 0, capsys.readouterr().err
    assert a.counts["ok"] > 0 and b.counts["ok"] > 0
    assert a.counts["ok"] + b.counts["ok"] == files.n_pairs
    assert main([*argv, "--batch"]) == 2
    assert "--batch sends to one endpoint" in capsys.readouterr().err


def test_one_server_or_several_judge_alike() -> None:
    one = LLMJudge(model="m", prompt="passage", base_url="http://127.0.0.1:9/v1")
    two = LLMJudge(
        model="m", prompt="passage", base_url=["http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"]
    )
    assert one.fingerprint() == two.fingerprint()
    assert one.judge_id == two.judge_id
    assert len(two.pool.members) == 2 and len(one.pool.members) == 1


@pytest.mark.slow
@pytest.mark.usefixtures("env")
@pytest.mark.parametrize("n_servers", [2, 3])
def test_a_server_stopped_mid_run_leaves_its_pairs_to_the_others(
    n_servers: int, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.ExitStack() as stack:
        fakes = [stack.enter_context(FakeServer(latency_ms=20)) for _ in range(n_servers)]
        first = fakes[0]
        stopped = threading.Event()

        def stop_first() -> None:
            deadline = time.monotonic() + 60
            while first.counts["ok"] < 6 and time.monotonic() < deadline:
                time.sleep(0.005)
            first.stop()
            stopped.set()

        killer = threading.Thread(target=stop_first, daemon=True)
        killer.start()
        store = tmp_path / "s.db"
        code = main(_grade(files, store, *(f.base_url for f in fakes), extra=("--quiet",)))
        killer.join()
        err = capsys.readouterr().err
        assert stopped.is_set()
        assert code == 0, err
        assert f"{first.base_url.rstrip('/')} is dropped from this run" in err
        stored = _stored(store)
        assert len(stored) == files.n_pairs
        assert all(status == "ok" for status, _ in stored)
        assert first.counts["ok"] >= 6 and all(f.counts["ok"] > 0 for f in fakes[1:])
        assert sum(f.counts["ok"] for f in fakes) == files.n_pairs  # none paid twice
        for fake in fakes:
            assert f"{fake.base_url.rstrip('/')} {fake.counts['ok']}" in err


@pytest.mark.slow
@pytest.mark.usefixtures("env")
def test_a_pair_failed_by_one_server_is_retried_on_another(
    servers: list[FakeServer], files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = servers
    a.default_fault = faults.server_error(500)
    store = tmp_path / "s.db"
    code = main(_grade(files, store, a.base_url, b.base_url, extra=("--quiet",)))
    err = capsys.readouterr().err
    assert code == 0, err
    stored = _stored(store)
    assert len(stored) == files.n_pairs and all(status == "ok" for status, _ in stored)
    assert b.counts["ok"] == files.n_pairs and a.counts["ok"] == 0
    assert a.counts["requests"] <= files.n_pairs  # each pair at most once there


@pytest.mark.usefixtures("env")
def test_every_server_dead_stops_with_exit_2(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeServer() as a, FakeServer() as b:
        urls = [a.base_url, b.base_url]
    store = tmp_path / "s.db"
    code = main(_grade(files, store, *urls, extra=("--quiet",)))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "none of the 2 servers of this run is answering" in err
    assert all(status != "ok" for status, _ in _stored(store))


@pytest.mark.usefixtures("env")
def test_the_api_spreads_over_a_list_of_servers(
    servers: list[FakeServer], files: GradeFiles, tmp_path: Path
) -> None:
    a, b = servers
    frame = rg.grade(
        runs=files.run,
        queries=files.queries,
        docs=files.docs,
        model="fake-model",
        base_url=[a.base_url, b.base_url],
        store=tmp_path / "api.db",
        concurrency=4,
        progress=False,
    )
    assert (frame.status == "ok").all() and len(frame) == files.n_pairs
    answers = frame.attrs["answers_by_server"]
    assert answers == {
        a.base_url.rstrip("/"): a.counts["ok"],
        b.base_url.rstrip("/"): b.counts["ok"],
    }
    assert min(answers.values()) > 0 and sum(answers.values()) == files.n_pairs


@pytest.mark.usefixtures("env")
def test_the_api_warns_when_a_server_is_dropped(
    servers: list[FakeServer], files: GradeFiles, tmp_path: Path
) -> None:
    a, _ = servers
    with FakeServer() as gone:
        dead = gone.base_url
    with pytest.warns(RelgradeWarning, match="is dropped from this run"):
        frame = rg.grade(
            runs=files.run,
            queries=files.queries,
            docs=files.docs,
            model="fake-model",
            base_url=[dead, a.base_url],
            store=tmp_path / "api.db",
            concurrency=4,
            progress=False,
        )
    assert (frame.status == "ok").all()
    assert a.counts["ok"] == files.n_pairs


# A repeated flag is never silently the last one -----------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["grade", "--queries", "a", "--queries", "b", "--docs", "d", "--run", "r"],
        ["grade", "--queries", "a", "--docs", "d", "--docs", "e", "--run", "r"],
        ["grade", "--store", "x.db", "--store", "y.db", "--run", "r"],
        ["batch", "export", "--model", "a", "--model", "b", "--run", "r", "out"],
        ["batch", "collect", "--base-url", "http://a/v1", "--base-url", "http://b/v1"],
        ["evaluate", "--format", "json", "--format", "csv", "q", "r"],
    ],
)
def test_a_repeated_single_value_flag_is_exit_2_naming_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    flag = next(w for i, w in enumerate(argv) if w.startswith("--") and w in argv[i + 1 :])
    assert f"argument {flag}: given more than once" in capsys.readouterr().err


def _actions(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for where, inner in _actions(sub):
                    yield f"{name} {where}".strip(), inner
        else:
            yield "", action


def test_no_option_of_any_command_keeps_only_its_last_value() -> None:
    found = list(_actions(build_parser()))
    assert len(found) > 100
    plain = [
        (where, action.option_strings)
        for where, action in found
        if action.option_strings and type(action) is argparse._StoreAction
    ]
    assert plain == []
    assert any(isinstance(action, StoreOnce) for _, action in found)
