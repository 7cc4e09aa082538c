"""The results files a `batch import` is given: folders opened, request files and empty files
told, and the error when no line holds a usable result."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grader.batch.files.import_followup import ImportSummary
from grader.errors import InputError
from grader.io.streams import LINE_LIMIT


def blank(path: Path) -> bool:
    """Whether a results file holds nothing but whitespace (read only when small)."""
    size = path.stat().st_size
    if size > 4096:
        return False
    return not path.read_bytes().strip()


def jsonl_files(paths: Sequence[str | Path], what: str = "results") -> list[Path]:
    """The files named: files as given, folders' `*.jsonl` in name order."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".jsonl")
            if not inside:
                raise InputError(f"no .jsonl {what} file in this folder", path=path)
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise InputError(f"no such {what} file or folder", path=path)
    return found


def refuse_request_files(files: Sequence[Path]) -> None:
    """InputError when a file given as results is a request file (its first line has `method`,
    `url` and `body` and no `response` or `error`): nothing is imported, none of its
    requests is marked failed."""
    import json

    for path in files:
        with path.open("rb") as fh:
            for number, raw in enumerate(iter(lambda: fh.readline(LINE_LIMIT), b""), 1):
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    break  # not JSON: the import says so, line by line
                if (
                    isinstance(line, dict)
                    and {"method", "url", "body"} <= line.keys()
                    and not {"response", "error"} & line.keys()
                ):
                    raise InputError(
                        "this is a request file (its lines have method, url and body, no "
                        "response): batch import takes the results an engine wrote for it; "
                        "nothing was imported",
                        path=path,
                        line=number,
                        hint="run the engine on it first (vllm run-batch -i REQUESTS -o "
                        "RESULTS), then import RESULTS",
                    )
                break


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
