"""A live regrade while the same new keys wait in an open batch job sends nothing for them (they
would be paid twice): they stay pending until the batch is collected, as the dry run says."""

from __future__ import annotations

import pytest

from grader.regrade.run import regrade
from grader.regrade.selection import parse_selection
from grader.store.store import Store
from tests.fake_batch import BatchPlan
from tests.helpers.batch_regrade import Setup, api_fixture, batch_servers_fixture, setup_fixture  # noqa: F401


@pytest.mark.slow
async def test_live_regrade_skips_keys_waiting_in_open_batches(setup: Setup) -> None:
    setup.api.plan(BatchPlan(polls_in_progress=3))
    with Store(setup.db) as store:
        submitted = await setup.run(store, wait=False)
        assert submitted.diff.pending == 6
        before = setup.api.server.counts["requests"]
        live = await regrade(store, setup.judge, parse_selection(("all",)))
        assert setup.api.server.counts["requests"] == before  # nothing asked live
        assert (live.sent, live.waiting_in_batches, live.already_done) == (0, 6, 0)
        assert live.diff.pending == 6
