"""The fake OpenAI Batch API the tests of `regrade --batch` and `batch collect` share: one
fake server per test module, reset for each test, with no key, URL, model or price table
taken from the environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_batch import FakeBatchAPI
from tests.fakeserver import FakeServer


@pytest.fixture(scope="module")
def batch_server() -> Iterator[tuple[FakeServer, FakeBatchAPI]]:
    """A fake server and its Batch API, one per test module (a fixture: import it)."""
    with FakeServer() as server:
        yield server, FakeBatchAPI(server)


def fresh_batch_api(
    batch_server: tuple[FakeServer, FakeBatchAPI], monkeypatch: pytest.MonkeyPatch
) -> FakeBatchAPI:
    """`batch_server`'s Batch API reset for one test, the environment's settings taken away."""
    server, batch_api = batch_server
    server.reset()
    batch_api.reset()
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    return batch_api


def prices_file(folder: Path) -> str:
    """A price table for the fake model in `folder`; its path."""
    path = folder / "prices.toml"
    path.write_text(
        '[models."fake-model"]\ninput = 1.0\ncached_input = 0.5\noutput = 2.0\n',
        encoding="utf-8",
    )
    return str(path)
