"""The words of `grade`'s summary against a local server: cached tokens a server does not report
are "not reported" (not 0), an unknown cost is counted in requests (two pairs with the same texts
share one), and a model served on this machine has no price to add (no hint to --prices)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.cost import spend_text
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


def _grade(
    files: GradeFiles, server: FakeServer, store: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """The summary line of grading `files` on `server` with an unpriced model."""
    args = files.args("--base-url", server.base_url, "--store", store, "--quiet")
    assert main([*args, "--model", "local-model", "--out", str(store.with_suffix(".jsonl"))]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("graded")]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(("cached", "said"), [(None, "cached not reported"), (0, "cached 0")])
def test_cached_tokens_not_reported_are_not_shown_as_0(
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cached: int | None,
    said: str,
) -> None:
    fake_server.cached_tokens = cached  # None: no prompt_tokens_details, as llama-cpp-python
    files = write_grade_files(tmp_path)
    line = _grade(files, fake_server, tmp_path / "s.db", capsys)
    assert f"completion {fake_server_completion(tmp_path)}, {said})" in line


def fake_server_completion(folder: Path) -> str:
    """The completion tokens summed over the distinct requests of the run's --out."""
    rows = [json.loads(line) for line in folder.joinpath("s.jsonl").read_text().splitlines()]
    by_key = {row["key"]: row["usage"]["completion_tokens"] for row in rows}
    return f"{sum(by_key.values()):,}"


def test_a_reported_cached_count_is_kept(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.cached_tokens = 3
    files = write_grade_files(tmp_path)
    line = _grade(files, fake_server, tmp_path / "s.db", capsys)
    assert f"cached {3 * files.n_pairs})" in line


def _shared_files(folder: Path) -> GradeFiles:
    """4 pairs: q1/d1 repeats the texts of q0/d0 under other ids (one content key)."""
    files = write_grade_files(folder, n_queries=2, depth=2)
    queries = files.queries.read_text().splitlines()
    files.queries.write_text(f"{queries[0]}\n{queries[0].replace('q0', 'q1', 1)}\n")
    docs = [json.loads(line) for line in files.docs.read_text().splitlines()]
    docs[2] = {**docs[0], "doc_id": "d2"}  # q1's first doc: d0's text
    files.docs.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return files


def test_unknown_cost_counts_requests_and_a_local_model_needs_no_price(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _shared_files(tmp_path)
    line = _grade(files, fake_server, tmp_path / "s.db", capsys)
    assert line.startswith(f"graded {files.n_pairs}, cached 0, failed 0,")
    rows = [json.loads(x) for x in tmp_path.joinpath("s.jsonl").read_text().splitlines()]
    keys = {row["key"] for row in rows}
    assert len(rows) == files.n_pairs == len(keys) + 1  # two pairs, one request
    assert fake_server.counts["requests"] == len(keys)
    assert f"unknown for {len(keys)} request(s) (no price: a model served on this machine)" in line
    assert "--prices" not in line
    prompt = sum({row["key"]: row["usage"]["prompt_tokens"] for row in rows}.values())
    assert f"prompt {prompt:,}," in line  # --out summed by distinct key: the summary's tokens


def test_an_unpriced_remote_model_points_to_prices() -> None:
    assert spend_text(0.0, 2) == "unknown for 2 request(s) (no price for the model; see --prices)"
    local = spend_text(0.5, 2, local=True)
    assert local == "$0.5000 + unknown for 2 request(s) (no price: a model served on this machine)"
