"""The Python API's frames checked as the command checks its files: every id a non-empty text
or integer, every text present, one text per id. Each failure is an `InputError` naming the
frame, the row (its position, from 0) and the column."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grader.errors import InputError


def check_id_values(column: pd.Series, what: str) -> None:
    """InputError for an id that is empty text or not text nor an integer (a
    tuple, a list, a bool): as text it would be no id, or one no file can hold. Empty (NaN,
    None) and decimal ids are `grader.io.python_inputs.check_ids`'s."""
    kind = pd.api.types.infer_dtype(column, skipna=True)
    if kind in ("integer", "floating", "empty"):  # (decimals: `check_ids`)
        return
    if kind == "string":
        blank = column.eq("").to_numpy()
        if blank.any():
            raise InputError(
                f"the {what}'s {column.name} column has an empty id (row {int(blank.argmax())})",
                hint="give every row an id",
            )
        return
    for row, value in enumerate(column):
        if isinstance(value, bool | np.bool_) or not isinstance(
            value, str | int | np.integer | float | np.floating
        ):
            raise InputError(
                f"the {what}'s {column.name} column holds a {type(value).__name__} "
                f"({value!r}, row {row}): an id is text or an integer",
                hint="give each id as text",
            )
        if isinstance(value, str) and not value.strip():
            raise InputError(
                f"the {what}'s {column.name} column has an empty id (row {row})",
                hint="give every row an id",
            )


def check_texts(frame: pd.DataFrame, columns: list[str], what: str) -> None:
    """InputError for a missing text (NaN, None) in any of `columns`, naming row and column."""
    for name in columns:
        empty = frame[name].isna().to_numpy()
        if empty.any():
            raise InputError(
                f"the {what}'s {name} column has no text (row {int(empty.argmax())})",
                hint="give every row its text (an empty string if it has none)",
            )


def one_text_per_id(ids: pd.Series, texts: pd.Series, what: str) -> None:
    """InputError when one id is given two different texts (the command refuses an id twice
    in a file): names the id, both rows and the text column."""
    pairs = pd.DataFrame({"id": ids.to_numpy(), "text": texts.astype(str).to_numpy()})
    distinct = pairs.drop_duplicates()
    clash = distinct["id"].duplicated()
    if not clash.any():
        return
    twice = distinct.loc[clash, "id"].iloc[0]
    rows = [int(r) for r in pairs.index[pairs["id"] == twice]]
    text = pairs["text"].tolist()
    first = rows[0]
    other = next(r for r in rows if text[r] != text[first])
    raise InputError(
        f"the {what} gives {ids.name} {twice!r} two different {texts.name} values (rows "
        f"{first} and {other})",
        hint=f"one {texts.name} per {ids.name}, as in a file",
    )
