"""examples/notebook.ipynb runs in a real Jupyter kernel (nbclient + ipykernel), offline and
against the fake server; the kernel's interrupt (the stop button) stops a grading cleanly."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOK = EXAMPLES / "notebook.ipynb"


@pytest.fixture
def kernel_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The kernel inherits this process's environment: no endpoint unless a test sets one."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES.parent))
    yield


def _run(nb: Any, cwd: Path) -> Any:
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    return client.execute()


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.append(str(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


@pytest.mark.slow
@pytest.mark.usefixtures("kernel_env")
def test_the_example_notebook_runs_offline_in_a_kernel() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    done = _run(nb, EXAMPLES)  # raises CellExecutionError if any cell fails
    texts = [_text(c) for c in done.cells if c.cell_type == "code"]
    assert "the LLM judge is skipped" in texts[-1]
    html = [
        o["data"]["text/html"]
        for c in done.cells
        for o in c.get("outputs", [])
        if "text/html" in o.get("data", {})
    ]
    assert any("<svg" in h for h in html)  # the calibration report, inline with its plots


@pytest.mark.slow
@pytest.mark.usefixtures("kernel_env")
def test_the_notebook_grades_with_the_fake_server_as_the_command(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.base_url)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import json\nprint('GRADES', json.dumps(llm[['query_id', 'doc_id', 'grade']]"
            ".astype(str).values.tolist()))"
        )
    )
    done = _run(nb, EXAMPLES)
    sent = fake_server.counts["requests"]
    line = next(t for t in map(_text, done.cells) if t.startswith("GRADES"))
    in_kernel = {(q, d): int(g) for q, d, g in json.loads(line.split(" ", 1)[1])}
    code = EXAMPLES / "code-search"
    out = tmp_path / "j.jsonl"
    args = ["grade", "--queries", code / "queries.tsv", "--docs", code / "docs.jsonl"]
    args += ["--run", code / "run.bm25.txt", "--run", code / "run.weak.txt", "--prompt", "code"]
    args += ["--base-url", fake_server.base_url, "--store", tmp_path / "s.db", "--quiet"]
    assert main([str(a) for a in [*args, "--out", out]]) == 0
    assert in_kernel == {(j.query_id, j.doc_id): j.grade for j in read_judgments(out)}
    assert sent == len(in_kernel)  # one request a pair in the kernel


INTERRUPTED_CELL = """
import relgrade as rg
try:
    rg.grade(runs={run!r}, queries={queries!r}, docs={docs!r}, base_url={url!r},
             store={store!r}, concurrency=2, progress=False)
except KeyboardInterrupt as exc:
    print("INTERRUPTED", exc)
    raise
"""

RESUME_CELL = """
frame = rg.grade(runs={run!r}, queries={queries!r}, docs={docs!r}, base_url={url!r},
                 store={store!r}, progress=False)
print("RESUMED", len(frame), int((frame.status == "ok").sum()))
"""


@pytest.mark.slow
@pytest.mark.usefixtures("kernel_env")
def test_the_kernels_stop_button_interrupts_a_grading(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = write_grade_files(tmp_path, n_queries=4, depth=6)
    fake_server.latency_ms = 400.0
    names = {
        "run": str(files.run),
        "queries": str(files.queries),
        "docs": str(files.docs),
        "url": fake_server.base_url,
        "store": str(tmp_path / "s.db"),
    }
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(INTERRUPTED_CELL.format(**names)),
            nbformat.v4.new_code_cell(RESUME_CELL.format(**names)),
        ]
    )
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True)

    async def drive() -> tuple[int, int]:
        async with client.async_setup_kernel():
            cell = asyncio.ensure_future(client.async_execute_cell(nb.cells[0], 0))
            deadline = time.monotonic() + 120
            while fake_server.counts["requests"] < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await client.km.interrupt_kernel()
            await cell
            sent = fake_server.counts["requests"]
            with Store(tmp_path / "s.db") as db:
                stored = db.count()
            fake_server.latency_ms = 0.0
            await client.async_execute_cell(nb.cells[1], 1)
            return sent, stored

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-kernel")
    sent, stored = asyncio.run(drive())
    first, second = _text(nb.cells[0]), _text(nb.cells[1])
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "KeyboardInterrupt", first
    assert "INTERRUPTED interrupted:" in first and sent < files.n_pairs
    assert f"RESUMED {files.n_pairs} {files.n_pairs}" in second
    assert 0 < stored <= sent  # every answer received was stored before the cell ended
    assert fake_server.counts["requests"] - sent == files.n_pairs - stored  # none paid twice
