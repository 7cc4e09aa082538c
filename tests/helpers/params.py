"""Parameters the quick loop (`pytest -m "not slow"`) samples and the full suite runs all of."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest


def quick_first(values: Iterable[Any], quick: int = 1) -> list[Any]:
    """`values` as parametrize values, all but the first `quick` marked `slow`: the quick loop
    runs a few cases of the same check, the full suite (CI) every one. A tuple is one case of
    several arguments, as `parametrize` reads it."""
    out: list[Any] = []
    for i, value in enumerate(values):
        if i < quick:
            out.append(value)
        else:
            args = value if isinstance(value, tuple) else (value,)
            out.append(pytest.param(*args, marks=pytest.mark.slow))
    return out
