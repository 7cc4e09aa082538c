"""An ir_datasets collection by its id (`--dataset ID`): queries, documents and qrels.

ir_datasets is an optional extra (`pip install 'relgrade[ir-datasets]'`); it downloads a
collection on first use into its own cache (`$IR_DATASETS_HOME`), and a dataset registered in
the process (`ir_datasets.registry.register`) is found by its id too.
"""

from __future__ import annotations

from typing import Any

from grader.errors import InputError

EXTRA_HINT = "pip install 'relgrade[ir-datasets]'"


def load_dataset(dataset_id: str) -> Any:
    """The ir_datasets dataset of `dataset_id`; InputError when ir_datasets is missing or
    does not know the id."""
    try:
        import ir_datasets
    except ImportError:
        raise InputError(f"--dataset {dataset_id} needs ir_datasets", hint=EXTRA_HINT) from None
    try:
        return ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(
            f"--dataset {dataset_id}: ir_datasets knows no dataset by that id",
            hint="see the ids at https://ir-datasets.com",
        ) from None


def has_part(dataset: Any, part: str) -> bool:
    """Whether the dataset provides `part` ("queries", "docs", "qrels")."""
    check = getattr(dataset, f"has_{part}", None)
    return bool(check()) if callable(check) else hasattr(dataset, f"{part}_iter")


def require(dataset: Any, dataset_id: str, part: str) -> None:
    if not has_part(dataset, part):
        raise InputError(
            f"--dataset {dataset_id} has no {part}", hint=f"give the {part} as a file instead"
        )
