"""The one order query ids are listed in: by number when every id is a whole number (2, 10, 100),
else as text; ids equal as numbers (1, 01) fall back to text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def query_order(query_ids: Sequence[str]) -> npt.NDArray[np.intp]:
    """Positions that list `query_ids` in the one order (a stable permutation)."""
    ids = [str(q) for q in query_ids]
    if ids and all(q.isascii() and q.isdigit() for q in ids):
        keyed: list[tuple[int, str]] = [(int(q), q) for q in ids]
        order = sorted(range(len(ids)), key=keyed.__getitem__)
    else:
        order = sorted(range(len(ids)), key=ids.__getitem__)
    return np.asarray(order, dtype=np.intp)
