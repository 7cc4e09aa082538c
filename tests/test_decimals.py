"""Numbers parsed in numpy (grader/io/trec_small.py) are `float()`'s, bit for bit, or refused alike.

The small-file reader of `relgrade evaluate` takes scores and grades from `parse_decimals`; a
score that differs in its last bit can reorder a ranking, so every cell is checked against
`float()` (and so against Arrow, which rounds correctly too) down to the sign of zero.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.io import trec_small
from grader.io.trec_small import parse_cells, parse_decimals
from tests.helpers.hypothesis_scale import examples

EDGES = [
    "0", "-0", "+0", "-0.0", "0.", ".0", "5.", ".5", "+.5", "-.5", "00.5", "007", "1.5",
    "123456789012345", "-123456789012345", "12345678901234.5", "0.000000000000001",
    "1234567890123456", "0.1234567890123456", "9007199254740993", "1e5", "1E+05", "-2.25e-1",
    "1e999", "1e-400", "inf", "-inf", "nan", "infinity", "0.1000000000000000055511151231257827",
    "2.0000001", "1.00000001",
]  # fmt: skip
BAD = ["", "-", "+", ".", "-.", "1.2.3", "1-2", "--1", "abc", "1e", "0x1A", "1..2", "+-1", "1 2"]


def _parse(cells: list[str]) -> np.ndarray:
    data = " ".join(cells).encode()
    lengths = np.array([len(c.encode()) for c in cells], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    return parse_decimals(data, starts, starts + lengths)


def _bits(values: np.ndarray | list[float]) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.uint64).tolist()  # type: ignore[no-any-return]


def test_edges_equal_float_bit_for_bit() -> None:
    assert _bits(_parse(EDGES)) == _bits([float(c) for c in EDGES])
    assert _bits(parse_cells([c.encode() for c in EDGES])) == _bits([float(c) for c in EDGES])


@pytest.mark.parametrize("cell", [*BAD, "1_0", "\u0661", "\u00bd"])
def test_cells_float_refuses_or_arrow_does_not_read_are_refused(cell: str) -> None:
    with pytest.raises(ValueError):
        _parse(["1.5", cell, "2"])
    with pytest.raises(ValueError):
        parse_cells([b"1.5", cell.encode()])


_DIGITS = st.text("0123456789", min_size=0, max_size=20)


@st.composite
def decimal_cells(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole, fraction = draw(_DIGITS), draw(_DIGITS)
    dot = draw(st.booleans())
    if not whole and not (dot and fraction):
        whole = "0"
    exponent = draw(st.sampled_from(["", "", "", "e5", "E-3", "e+300", "e-320"]))
    return sign + whole + ("." + fraction if dot else "") + exponent


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(decimal_cells(), min_size=1, max_size=40))
def test_random_decimals_equal_float_and_arrow(cells: list[str]) -> None:
    got = _parse(cells)
    assert _bits(got) == _bits([float(c) for c in cells])
    arrow = pc.cast(pa.array(cells), pa.float64()).to_numpy()
    assert _bits(got) == _bits(arrow)


def test_short_decimals_are_parsed_in_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells of at most MAX_DIGITS digits without an exponent never go through float()."""

    def refuse(cell: bytes) -> float:
        raise AssertionError(f"{cell!r} went through float()")

    monkeypatch.setattr(trec_small, "_slow", refuse)
    many = [f"{i / 7:.6f}" for i in range(-500, 500)] + ["-0", "+.5", "5.", "123456789012345"]
    assert _bits(_parse(many)) == _bits([float(c) for c in many])
