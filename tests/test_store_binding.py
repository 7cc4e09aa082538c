"""None and bytes bind as themselves through the adapters `grader.store` registers."""

from __future__ import annotations

import sqlite3

import grader.store  # noqa: F401  (registers them)
from grader.store.binding import register_plain_adapters


def test_none_and_bytes_bind_as_null_and_blob_through_a_registered_adapter() -> None:
    register_plain_adapters()  # twice changes nothing
    for kind in (type(None), bytes):
        assert (kind, sqlite3.PrepareProtocol) in sqlite3.adapters
    with sqlite3.connect(":memory:") as conn:
        row = conn.execute(
            "SELECT ?, typeof(?), ?, typeof(?), ?, typeof(?)",
            (None, None, b"\x00k", b"\x00k", bytearray(b"a"), bytearray(b"a")),
        ).fetchone()
    assert row == (None, "null", b"\x00k", "blob", b"a", "blob")
