"""The store's log checkpointed on a thread of its own during bulk writes
(`grader.store.store`): the writers' commits leave the log alone, a checkpoint asked
for copies it, leaving waits for a last one, and the connections checkpoint at commit again."""

from __future__ import annotations

from pathlib import Path

from grader.batch.adapter import job_config
from grader.batch.files.export_files import export_requests
from grader.batch.files.exports import ExportState
from grader.store.store import DEFAULT_AUTOCHECKPOINT, Store, checkpoints_beside
from tests.helpers.batch_export import batch_judge, export_pairs

DOCS = 600  # ~4,000 pages of text: well past SQLite's 1,000-page checkpoint at commit
TEXT = "passage words " * 450


def put_docs(store: Store, first: int) -> None:
    store.put_text_rows(
        [], [(f"d{i}", f"{TEXT}{i}", None, "{}") for i in range(first, first + DOCS)]
    )


def autocheckpoint(store: Store) -> int:
    return int(store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_a_writers_commit_leaves_the_log_to_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Store(path) as store, ExportState(store) as state:
        size_before = path.stat().st_size
        with checkpoints_beside(path, [store, state]):
            assert autocheckpoint(store) == 0
            put_docs(store, 0)
            # Past 1,000 pages, a commit would have copied the log into the file itself.
            assert path.stat().st_size == size_before
        # Leaving waited for a last checkpoint: the texts are in the file.
        assert path.stat().st_size > size_before + DOCS * len(TEXT)
        assert autocheckpoint(store) == DEFAULT_AUTOCHECKPOINT
        assert state._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000


def test_checkpoints_asked_for_copy_each_commit_and_lose_none(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Store(path) as store:
        with checkpoints_beside(path, [store]) as checkpoints:
            for round_no in range(4):
                put_docs(store, round_no * DOCS)
                checkpoints.due()
        assert path.stat().st_size > 4 * DOCS * len(TEXT)
    with Store(path) as reopened:
        (count,) = reopened._conn.execute("SELECT COUNT(*) FROM docs").fetchone()
    assert count == 4 * DOCS


def test_stop_without_a_checkpoint_asked_ends_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Store(path) as store, checkpoints_beside(path, [store]) as checkpoints:
        thread = checkpoints._thread
    assert not thread.is_alive()


def test_an_export_leaves_its_log_copied_and_autocheckpoint_back(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Store(path) as store:
        size_before = path.stat().st_size
        judge = batch_judge()
        config = job_config(judge, "passage")
        pairs = export_pairs(40)
        summary = export_requests(store, judge, config, pairs, tmp_path / "out", batch_pairs=10)
        assert summary.pairs == 40
        assert path.stat().st_size > size_before  # the export's rows, copied at its end
        assert autocheckpoint(store) == DEFAULT_AUTOCHECKPOINT
