"""Numbers in a byte buffer parsed in numpy exactly as `float()` parses them: a short decimal
has an exact mantissa and power of ten, so one IEEE division gives float()'s value (Clinger's
fast path). Any other cell goes through `float()`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAX_DIGITS = 15
"""Digits of the cells parsed in numpy: any 15-digit integer is an exact double."""

_POW10_FLOAT = np.array([float(10**k) for k in range(MAX_DIGITS + 1)])  # exact doubles
_ZERO, _DOT, _MINUS, _PLUS = ord("0"), ord("."), ord("-"), ord("+")


def parse_decimals(
    data: bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """`float(data[starts[i]:ends[i]])` of every cell; ValueError for a cell `float()` refuses,
    or that holds `_` or a non-ASCII character."""
    n = len(starts)
    if not n:
        return np.empty(0, dtype=np.float64)
    buffer = np.frombuffer(data, dtype=np.uint8)
    last = len(buffer) - 1
    first = buffer[np.minimum(starts, last)]
    negative = first == _MINUS
    at = starts + (negative | (first == _PLUS))  # after the sign
    mantissa = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    fraction = np.zeros(n, dtype=np.int64)  # digits after the dot
    dotted = np.zeros(n, dtype=bool)
    fast = ends - at <= MAX_DIGITS + 1  # the digits and a dot
    for k in range(int((ends - at).max()) if fast.any() else 0):
        where = at + k
        inside = fast & (where < ends)
        byte = buffer[np.minimum(where, last)]
        digit = inside & (byte - _ZERO <= 9)  # uint8: a byte below "0" wraps above 9
        dot = inside & (byte == _DOT)
        fast &= ~inside | digit | (dot & ~dotted)
        mantissa = np.where(digit, mantissa * 10 + (byte - _ZERO), mantissa)
        digits += digit
        fraction += digit & dotted
        dotted |= dot
    fast &= (digits >= 1) & (digits <= MAX_DIGITS)
    values = mantissa.astype(np.float64) / _POW10_FLOAT[np.minimum(fraction, MAX_DIGITS)]
    out: npt.NDArray[np.float64] = np.where(negative, -values, values)
    for row in np.flatnonzero(~fast).tolist():
        out[row] = _slow(data[starts[row] : ends[row]])
    return out


def parse_cells(cells: list[bytes]) -> npt.NDArray[np.float64]:
    """`parse_decimals` of cells already cut (a file read line by line)."""
    return np.fromiter(map(_slow, cells), dtype=np.float64, count=len(cells))


def _slow(cell: bytes) -> float:
    if not cell.isascii() or b"_" in cell:
        raise ValueError(f"not a number the readers take: {cell!r}")
    return float(cell)
