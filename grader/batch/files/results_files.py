"""The results files a `relgrade batch import` is given: folders opened, empty files told, and
the error when no line of them holds a usable result (`grader.batch.files.import_files`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grader.batch.files.import_followup import ImportSummary
from grader.errors import InputError


def blank(path: Path) -> bool:
    """Whether a results file holds nothing but whitespace (read only when small)."""
    size = path.stat().st_size
    if size > 4096:
        return False
    return not path.read_bytes().strip()


def results_files(paths: Sequence[str | Path]) -> list[Path]:
    """The results files named: files as given, folders' `*.jsonl` in name order."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".jsonl")
            if not inside:
                raise InputError("no .jsonl results file in this folder", path=path)
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise InputError("no such results file or folder", path=path)
    return found


def nothing_usable(files: list[Path], summary: ImportSummary) -> InputError:
    """The error of an import whose files hold no usable results line, with why."""
    reasons = []
    if summary.n_malformed:
        shown = ", ".join(summary.malformed)
        more = ", ..." if summary.n_malformed > len(summary.malformed) else ""
        reasons.append(f"{summary.n_malformed:,} lines are not JSON ({shown}{more})")
    if summary.truncated:
        reasons.append(f"a last line is cut short ({', '.join(summary.truncated)})")
    if summary.empty:
        reasons.append(f"{len(summary.empty)} files are empty")
    return InputError(
        "no usable results line: "
        + ("; ".join(reasons) or "no line holds a result")
        + "; nothing was imported",
        path=files[0] if len(files) == 1 else ", ".join(map(str, files)),
        hint="import the results an engine wrote for the request files of `relgrade batch "
        "export`, e.g. vllm run-batch -i REQUESTS -o RESULTS",
    )
