"""The judgment store: round trip, texts, call log, ok-never-overwritten, migrations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grader.errors import StoreError
from grader.models import CallRecord, Doc, Query, Usage
from grader.store import migrations as store_migrations
from grader.store.store import Store
from grader.store.writing import text_rows
from tests.helpers.judgments import FP, failed, ok, stored_judgments


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    j = ok("k1")
    with Store(tmp_path / "s.db") as store:
        assert store.put_many([(j, FP)]) == 1
        store.put_text_rows(*text_rows([Query(query_id="q1", text="what")], []))
    with Store(tmp_path / "s.db") as store:
        got = store.get_many(["k1", "missing"])
        assert got == {"k1": j}
        assert store.fingerprint("k1") == FP
        assert store.count() == 1 and store.count(status="ok") == 1
        assert list(stored_judgments(store, model="m", prompt_name="passage")) == [j]
        assert list(stored_judgments(store, status="failed")) == []


def test_texts_are_kept_for_regrading(tmp_path: Path) -> None:
    doc = Doc(doc_id="a.py::f", text="def f(): ...", title="f", metadata={"path": "a.py"})
    with Store(tmp_path / "s.db") as store:
        store.put_text_rows(*text_rows([Query(query_id="q1", text="find f")], [doc]))
        store.put_text_rows(*text_rows([Query(query_id="q1", text="find f, new text")], [doc]))
        assert store.queries() == {"q1": Query(query_id="q1", text="find f, new text")}
        assert store.docs(["a.py::f", "nope"]) == {"a.py::f": doc}


def test_ok_is_never_overwritten_by_a_failure(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.put_many([(ok("k1", grade=3), None)])
        assert store.put_many([(failed("k1"), None)]) == 0
        assert store.get_many(["k1"])["k1"].grade == 3


def test_a_failure_is_replaced_by_a_later_ok(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.put_many([(failed("k1"), None)])
        assert store.statuses(["k1"]) == {"k1": "failed"}
        stored = store.get_many(["k1"])["k1"]
        assert stored.error is not None and stored.error.raw_reply == "7"
        assert store.put_many([(ok("k1", grade=1), None)]) == 1
        assert store.get_many(["k1"])["k1"].grade == 1
        assert store.count() == 1


def test_get_many_handles_more_keys_than_sqlite_variables(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.put_many([(ok(f"k{i}", did=f"d{i}"), FP) for i in range(1200)])
        assert len(store.get_many(f"k{i}" for i in range(0, 2400))) == 1200


def test_call_log_masks_secrets(tmp_path: Path) -> None:
    secret = "sk-test-SECRET-123"
    with Store(tmp_path / "s.db", secrets=[secret]) as store:
        store.put_many(
            [],
            [
                CallRecord(
                    key="k1",
                    query_id="q1",
                    doc_id="d1",
                    judge="m",
                    model="m",
                    attempt=2,
                    outcome="error",
                    output_mode="json_schema",
                    http_status=401,
                    latency_ms=12.5,
                    usage=Usage(prompt_tokens=5),
                    error_type="AuthenticationError",
                    error_message=f"bad key {secret}",
                )
            ],
        )
        (call,) = store.calls("k1")
        assert call["attempt"] == 2 and call["http_status"] == 401
        assert call["prompt_tokens"] == 5
        assert call["error_message"] == "bad key [redacted]"


def test_new_store_is_at_the_latest_schema(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        assert store.schema_version == store_migrations.latest_version()
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    applied = [v for (v,) in conn.execute("SELECT version FROM schema_migrations")]
    assert applied == [m.version for m in store_migrations.MIGRATIONS]


def test_appended_migration_upgrades_an_old_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(tmp_path / "s.db") as store:
        store.put_many([(ok("k1"), None)])
    extra = store_migrations.Migration(
        store_migrations.latest_version() + 1,
        "test column",
        ("ALTER TABLE judgments ADD COLUMN note TEXT",),
    )
    monkeypatch.setattr(store_migrations, "MIGRATIONS", [*store_migrations.MIGRATIONS, extra])
    monkeypatch.setattr("grader.store.store.MIGRATIONS", store_migrations.MIGRATIONS)
    with Store(tmp_path / "s.db") as store:
        assert store.schema_version == extra.version
        assert store.get_many(["k1"])["k1"].grade == 2


def test_failing_migration_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(tmp_path / "s.db") as store:
        before = store.schema_version
    bad = store_migrations.Migration(
        before + 1, "broken", ("CREATE TABLE t (x)", "THIS IS NOT SQL")
    )
    monkeypatch.setattr("grader.store.store.MIGRATIONS", [*store_migrations.MIGRATIONS, bad])
    monkeypatch.setattr("grader.store.store.latest_version", lambda: bad.version)
    with pytest.raises(StoreError, match=r"migration .* rolled back"):
        Store(tmp_path / "s.db")
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == before
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 't'").fetchone() is None


def test_store_from_a_newer_relgrade_is_refused(tmp_path: Path) -> None:
    Store(tmp_path / "s.db").close()
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(StoreError, match="newer relgrade"):
        Store(tmp_path / "s.db")


def test_a_file_that_is_not_a_store_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("hello, this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable relgrade store"):
        Store(path)
