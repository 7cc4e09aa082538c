"""Fixtures of the regrade-through-the-Batch-API tests: the fake servers and a graded store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.batch.adapter import LLMBatchJudge
from grader.batch.api.client import BatchClient
from grader.batch.api.jobs import BatchOptions, BatchRunner
from grader.judges.llm.retry import RetryPolicy
from grader.regrade.run import RegradeOutcome, regrade
from grader.regrade.selection import parse_selection
from grader.store.store import Store
from tests.batch_helpers import PRICES, live_judge, new_prompt, seed_store
from tests.fake_batch import FakeBatchAPI
from tests.fakeserver import FakeServer


@pytest.fixture(name="batch_servers", scope="module")
def batch_servers_fixture() -> Iterator[tuple[FakeServer, FakeBatchAPI]]:
    with FakeServer() as server:
        yield server, FakeBatchAPI(server)


@pytest.fixture(name="api")
def api_fixture(batch_servers: tuple[FakeServer, FakeBatchAPI]) -> FakeBatchAPI:
    server, batch_api = batch_servers
    server.reset()
    batch_api.reset()
    return batch_api


class Setup:
    def __init__(self, api: FakeBatchAPI, tmp_path: Path, n: int = 6) -> None:
        self.api = api
        self.db = tmp_path / "store.db"
        self.olds = seed_store(self.db, n)
        self.prompt = new_prompt(tmp_path)
        self.judge = live_judge(api.server.base_url, self.prompt)

    def runner(self, store: Store, **options: Any) -> BatchRunner:
        client = BatchClient(
            base_url=self.api.server.base_url,
            api_key="sk-test",
            policy=RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01),
        )
        return BatchRunner(store, client, options=BatchOptions(**{"poll_initial": 0.0, **options}))

    async def run(
        self, store: Store, select: tuple[str, ...] = ("all",), wait: bool = True, **options: Any
    ) -> RegradeOutcome:
        batch_judge = LLMBatchJudge(self.judge)
        return await regrade(
            store,
            self.judge,
            parse_selection(select),
            runner=self.runner(store, **options),
            batch_judge=batch_judge,
            judge_for=lambda config: batch_judge,
            job_config={"prompt": str(self.prompt.source), "model": self.judge.model},
            wait=wait,
            batch_discount=PRICES.batch_discount,
        )


@pytest.fixture(name="setup")
def setup_fixture(api: FakeBatchAPI, tmp_path: Path) -> Setup:
    return Setup(api, tmp_path)
