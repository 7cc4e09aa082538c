"""An ir_datasets collection that cannot be downloaded (no network): one line and exit 2 on the
command line, an InputError in Python, never ir_datasets' own traceback or bare RuntimeError.

Nothing leaves the machine: the proxies point at a closed local port (9, discard, which nothing
serves here), ir_datasets' home is an empty folder of the test, and the Python test's dataset
downloads from that closed port itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import relgrade as rg

pytest.importorskip("ir_datasets")

CLOSED = "http://127.0.0.1:9"
DL2019 = "msmarco-passage/trec-dl-2019/judged"


def _offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper() != "NO_PROXY"}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env[name] = CLOSED
    env["IR_DATASETS_HOME"] = str(home)
    env["IR_DATASETS_DL_TRIES"] = "2"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "grade"])
def test_the_command_says_one_line_and_exits_2(tmp_path: Path, command: str) -> None:
    home = tmp_path / "ir_datasets_home"
    home.mkdir()
    run = tmp_path / "run.txt"
    run.write_text("19335 Q0 1017759 1 2.0 r\n")
    args = ["--dataset", DL2019, str(run)]
    if command == "grade":
        args = ["--dataset", DL2019, "--run", str(run), "--judge", "lexical"]
        args += ["--store", str(tmp_path / "s.db")]
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", command, *args],
        env=_offline_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    said = f"relgrade {command}: error: ir_datasets could not download {DL2019}"
    assert lines[0].startswith(said)
    assert "no network?" in lines[0] and str(home) in lines[0]


def _unreachable(folder: Path) -> Any:
    """An ir_datasets dataset whose every file downloads from the closed port."""
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import Cache, Download, RequestsDownload

    def file(name: str) -> Any:
        return Cache(Download([RequestsDownload(f"{CLOSED}/{name}", tries=1)]), folder / name)

    return Dataset(
        TsvQueries(file("queries.tsv")),
        TsvDocs(file("docs.tsv")),
        TrecQrels(file("qrels.txt"), {0: "not relevant", 1: "relevant"}),
    )


def test_python_gets_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, CLOSED)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    dataset = _unreachable(tmp_path)
    run = {"r": {"q1": {"d1": 1.0}}}
    with pytest.raises(rg.InputError, match=r"ir_datasets could not download .* \(qrels\)"):
        rg.evaluate(dataset, run)
    with pytest.raises(rg.InputError, match=r"ir_datasets could not download .* \(docs\)"):
        rg.grade(
            runs=run,
            queries=dataset,
            docs=dataset,
            judge="lexical",
            store=str(tmp_path / "s.db"),
            progress=False,
        )
    with pytest.raises(rg.InputError, match=r"\(queries\): .*no network\?"):
        rg.grade(
            runs=run,
            queries=dataset,
            docs={"d1": "a passage"},
            judge="lexical",
            store=str(tmp_path / "s.db"),
            progress=False,
        )


def test_the_command_holds_ir_datasets_notices_until_past_the_download() -> None:
    """Notices come out once ir_datasets is past the download (or the command ends well),
    retry lines never, and nothing of it when the command fails."""
    import logging

    from grader.cli.main import held_dataset_log

    logger = logging.getLogger("ir_datasets")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with held_dataset_log():
            logger.info("Please confirm you agree to the data usage agreement")
            logger.info("download error: refused. Retrying from start.")
            assert seen == []
            logger.info("[starting] building docstore")
            logger.info("[finished] building docstore")
        assert seen == [
            "Please confirm you agree to the data usage agreement",
            "[starting] building docstore",
            "[finished] building docstore",
        ]
        seen.clear()
        with held_dataset_log():
            logger.info("a notice")
        assert seen == ["a notice"]  # a command that ends well says it at the end
        seen.clear()
        with pytest.raises(rg.InputError), held_dataset_log():
            logger.info("a notice")
            logger.warning("Download failed: refused")
            raise rg.InputError("ir_datasets could not download it: no network?")
        assert seen == []
        logger.info("after the command")
        assert seen == ["after the command"]  # the filter is gone
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
