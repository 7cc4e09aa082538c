"""The grade job's options checked once, before any file is read or request sent: limits, the
judge, the verifier, and outputs that could not be written or would replace an input."""

from __future__ import annotations

from pathlib import Path

from grader.errors import InputError
from grader.io.python_inputs import is_path
from grader.job import people
from grader.job.judges import check_judge_args
from grader.job.options import GradeOptions
from grader.job.path_clash import refuse_clashes
from grader.prompts import OUTPUT_MODES
from grader.spelling import option


def check_options(o: GradeOptions, also_judged: people.AlsoJudged) -> None:
    """Raise InputError for options that cannot go together or hold a bad value."""
    if o.concurrency < 1:
        raise InputError(f"{option('--concurrency', 'concurrency')} must be at least 1")
    if o.max_attempts < 1:
        raise InputError(f"{option('--max-attempts', 'max_attempts')} must be at least 1")
    if o.max_cost is not None and o.max_cost < 0:
        raise InputError(f"{option('--max-cost', 'max_cost')} must not be negative")
    check_judge_args(o)
    if o.output_mode not in OUTPUT_MODES:
        raise InputError(f"{option('--output-mode', 'output_mode')}: no mode {o.output_mode!r}")
    if (o.verify_prompt or o.verify_model) and not o.verify_low:
        raise InputError("--verify-prompt/--verify-model need --verify-low")
    _refuse_clashes(o, also_judged)
    _check_folders(o)


def _check_folders(o: GradeOptions) -> None:
    """Fail before grading (and paying) when an output or the store could not be written."""
    names = ["out", "qrels_out", "merged_out"] + ([] if o.dry_run else ["store"])
    for name in names:  # a dry run never creates a store
        if (value := getattr(o, name)) is None:
            continue
        path, said = Path(value), option("--" + name.replace("_", "-"), name)
        if not (path.parent if str(path.parent) else Path(".")).is_dir():
            raise InputError(
                f"{said}: the folder does not exist", path=path, hint="create it first"
            )
        if path.is_dir():
            raise InputError(f"{said}: is a folder, not a file", path=path)


def _refuse_clashes(o: GradeOptions, also_judged: people.AlsoJudged) -> None:
    def paths(values: list[object]) -> list[str]:
        return [str(v) for v in values if is_path(v)]

    refuse_clashes(
        [
            ("--run", paths(o.run)),
            ("--skip-judged", paths(o.skip_judged)),
            ("--queries", paths([o.queries])),
            ("--docs", paths([o.docs])),
        ],
        [
            ("--out", o.out),
            ("--qrels-out", o.qrels_out),
            ("--merged-out", o.merged_out),
            ("--also-judged's manifest", list(people.manifest_paths(o, also_judged))),
            ("--store", o.store),
        ],
    )
