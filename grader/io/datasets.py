"""An ir_datasets collection by its id (`--dataset ID`): queries, documents and qrels (the optional
extra `relgrade[ir-datasets]`; a dataset registered in the process is found too)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from grader.errors import InputError


def load_dataset(dataset_id: str) -> Any:
    """The ir_datasets dataset of `dataset_id` (InputError: no ir_datasets, or an unknown id)."""
    try:
        import ir_datasets
    except ImportError:
        hint = "pip install 'relgrade[ir-datasets]'"
        raise InputError(f"--dataset {dataset_id} needs ir_datasets", hint=hint) from None
    try:
        return ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(
            f"--dataset {dataset_id}: ir_datasets knows no dataset by that id",
            hint="see the ids at https://ir-datasets.com",
        ) from None


def iterate(dataset: Any, part: str) -> Iterator[Any]:
    """The records of `part` of an ir_datasets dataset (downloaded on first use)."""
    with downloading(dataset, part):
        yield from getattr(dataset, f"{part}_iter")()


@contextmanager
def downloading(dataset: Any, part: str) -> Iterator[None]:
    """A failed download while ir_datasets reads `part` of `dataset`, as a one-line InputError."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        raise InputError(
            f"ir_datasets could not download {_name(dataset)} ({part}): {_cause(exc)}: no network?",
            hint=f"what it downloads is kept in {_home()}; run again once online",
        ) from exc


def _name(dataset: Any) -> str:
    get = getattr(dataset, "dataset_id", None)
    try:
        return str(get()) if callable(get) else "the dataset"
    except Exception:  # a dataset object that cannot say its id: the message goes on
        return "the dataset"


def _cause(exc: BaseException) -> str:
    """The kind of failure, short: the exception's class (the last mirror's when all failed)."""
    if isinstance(exc, RuntimeError) and len(exc.args) == 2 and isinstance(exc.args[1], list):
        errors = [e for e in exc.args[1] if isinstance(e, tuple) and len(e) == 2]
        if errors:
            exc = errors[-1][1]
    return type(exc).__name__


def _home() -> str:
    """Where ir_datasets keeps its downloads ($IR_DATASETS_HOME, ~/.ir_datasets by default)."""
    try:
        from ir_datasets.util import home_path

        return str(home_path())
    except Exception:  # an ir_datasets without it: name the variable instead
        return "$IR_DATASETS_HOME"


def require(dataset: Any, dataset_id: str, part: str) -> None:
    """InputError when the dataset does not provide `part` ("queries", "docs", "qrels")."""
    check = getattr(dataset, f"has_{part}", None)
    if not (check() if callable(check) else hasattr(dataset, f"{part}_iter")):
        raise InputError(
            f"--dataset {dataset_id} has no {part}", hint=f"give the {part} as a file instead"
        )
