"""`batch import`'s cost a line in instructions (callgrind): a figure the machine's speed does
not move, unlike lines/s (this 2-core machine's speed drifts by a quarter within the hour).

A small export (--pairs, default 5,000, the pairs of `bench/batch_files.py`) is answered as
vLLM run-batch would (logprobs, ~1.8 KB a line). Then, each under valgrind with instrumentation
on only around the work measured:

- worker: `RangeReader.read` of the whole results file and pickling its result (what a worker
  process does with its ranges);
- writer: cutting the file into ranges, unpickling the result, deciding its answers and
  writing them (`Importer._take`, `_flush`: the writing process), into a copy of the store;
- json.loads: decoding each line with the standard library alone (the peer: the import's whole
  worker cost in units of a plain decode).

    python bench/import_instructions.py               # ~1 minute; needs valgrind
    python bench/import_instructions.py --pairs 2000  # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from batch_files import pairs  # (bench/, this script's folder, is on the path)

from grader.batch.adapter import JobJudges, LLMBatchJudge, job_config
from grader.batch.files.export_files import export_requests
from grader.batch.files.exports import ExportState, split_custom_id
from grader.batch.files.import_files import RANGE_BYTES, Importer
from grader.batch.files.import_followup import ImportSummary
from grader.batch.files.import_work import RangeReader, RangeResult, RangeTask, line_ranges
from grader.judges.llm.judge import LLMJudge
from grader.prompts import PromptSpec, load_prompt
from grader.store.store import Store
from tests import fake_engine
from tests.fakeserver import FakeServer

PHASES = ("worker", "writer", "json.loads")


def make_judge(model: str, prompt: PromptSpec) -> LLMJudge:
    return LLMJudge(model=model, prompt=prompt, base_url="http://127.0.0.1:9/v1")


def prepare(work: Path, n: int) -> Path:
    """A store with `n` pairs exported, and their results file (returned)."""
    judge = LLMBatchJudge(make_judge("fake-model", load_prompt("passage")))
    with Store(work / "bench.db") as store:
        summary = export_requests(
            store, judge, job_config(judge, "passage"), pairs(n), work / "requests", total=n
        )
    server = FakeServer()
    results = work / "results.jsonl"
    with results.open("wb") as out:
        for path in summary.files:
            part = work / f"{path.stem}.part"
            fake_engine.run_batch(path, part, lambda b: (200, server.completion_for(b), None))
            out.write(part.read_bytes())
            part.unlink()
    return results


def _toggle(on: bool) -> None:
    """Instrumentation on or off in this process (it runs under callgrind)."""
    flag = "on" if on else "off"
    subprocess.run(["callgrind_control", "-i", flag, str(os.getpid())], capture_output=True)


def measure(work: Path, phase: str) -> int:
    """Run one phase with instrumentation around it; the lines it did."""
    results = work / "results.jsonl"
    data = results.read_bytes()
    lines = data.count(b"\n")
    if phase == "json.loads":
        raw = data.splitlines()
        _toggle(True)
        for line in raw:
            json.loads(line)
        _toggle(False)
        return lines
    with Store(work / "bench.db") as store, ExportState(store) as state:
        export_id = split_custom_id(json.loads(data[: data.index(b"\n")])["custom_id"])
        assert export_id is not None
        judge = JobJudges(make_judge).for_job(state.config(export_id[0]) or {})
        task = RangeTask(str(results), 0, len(data), 1, True, {export_id[0]: judge.replies})
        reader = RangeReader(store, state)
        reader.read(task)  # once first: statements prepared, pages cached
        if phase == "worker":
            _toggle(True)
            sent = pickle.dumps(reader.read(task), protocol=pickle.HIGHEST_PROTOCOL)
            _toggle(False)
            return lines if sent else 0
        sent = pickle.dumps(reader.read(task), protocol=pickle.HIGHEST_PROTOCOL)
    copy = work / "writer.db"
    shutil.copyfile(work / "bench.db", copy)
    with Store(copy) as store, Importer(store, JobJudges(make_judge).for_job) as importer:
        importer.judge(export_id[0], results)  # the judge made before, as a real import does
        summary = importer._summary = ImportSummary(files=1)
        _toggle(True)
        list(line_ranges(results, RANGE_BYTES))
        result: RangeResult = pickle.loads(sent)
        importer._take(result)
        importer._flush()
        _toggle(False)
    copy.unlink()
    return summary.lines


def under_valgrind(work: Path, phase: str) -> float:
    """Instructions a line of `phase`, run under callgrind."""
    out = work / f"callgrind.{phase}"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    cmd += [sys.executable, __file__, "--measure", phase, "--dir", str(work)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    collected = re.search(r"Collected : (\d+)", done.stderr)
    lines = re.search(r"lines (\d+)", done.stdout)
    if collected is None or lines is None:
        raise RuntimeError(f"no count from callgrind:\n{done.stderr[-2000:]}")
    out.unlink(missing_ok=True)
    return int(collected.group(1)) / int(lines.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=5_000)
    parser.add_argument("--dir", help="work folder (default: a temporary one, removed)")
    parser.add_argument("--measure", choices=PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # inside valgrind
        print(f"lines {measure(Path(args.dir), args.measure)}")
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind (callgrind) is not installed: nothing measured")
        return
    work = Path(args.dir or tempfile.mkdtemp(prefix="relgrade-import-instructions-"))
    work.mkdir(exist_ok=True)
    try:
        t0 = time.perf_counter()
        prepare(work, args.pairs)
        cost = {phase: under_valgrind(work, phase) for phase in PHASES}
        peer = cost["json.loads"]
        print(
            f"batch import, {args.pairs:,} lines (~1.8 KB, logprobs): instructions a line: "
            f"worker {cost['worker']:,.0f} ({cost['worker'] / peer:.1f}x json.loads of the "
            f"line, {peer:,.0f}), writer {cost['writer']:,.0f}; "
            f"{time.perf_counter() - t0:.0f} s"
        )
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
