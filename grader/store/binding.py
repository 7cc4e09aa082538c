"""Binding None and bytes to SQLite statements without Python's search for a way to adapt them.

Python's sqlite3 binds int, float, str and bytearray at once; any other value (None, bytes)
first goes through its adapter search, which, finding no adapter, asks the protocol for
`__adapt__` and the value for `__conform__`: failed attribute lookups whose error messages are
formatted and dropped. A judgments row binds two (its key's 32 bytes, an empty `extra`). These
adapters are found in the registry first and give each value back unchanged, which skips the
search. They are the sqlite3 module's (process-wide), and change no value anyone binds.
"""

from __future__ import annotations

import sqlite3


def _none(value: None) -> None:
    return value


def _bytes(value: bytes) -> bytes:
    return value


def register_plain_adapters() -> None:
    """Register the identity adapters for None and bytes (idempotent)."""
    sqlite3.register_adapter(type(None), _none)
    sqlite3.register_adapter(bytes, _bytes)
