"""The Batch API client through the real SDK against the fake /v1/files and /v1/batches."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from grader.batch.api.client import BatchClient
from grader.batch.requests import split_requests
from grader.errors import JudgeError
from grader.judges.llm.retry import RetryPolicy
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer


@pytest.fixture
def batch_api() -> Iterator[FakeBatchAPI]:
    with FakeServer() as server:
        yield FakeBatchAPI(server)


def _bodies(n: int) -> list[tuple[str, dict[str, object]]]:
    return [
        (f"sha256:{i}", {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
        for i in range(n)
    ]


@pytest.mark.slow
async def test_upload_create_poll_download(batch_api: FakeBatchAPI) -> None:
    client = BatchClient(base_url=batch_api.server.base_url, api_key="sk-test")
    batch_api.plan(BatchPlan(polls_in_progress=1, errors={2: (500, "server_error")}))
    ((_, content),) = split_requests(_bodies(3))
    file_id = await client.upload(content, filename="x.jsonl")
    assert batch_api.contents[file_id] == content
    info = await client.create(file_id, metadata={"relgrade_job": "1"})
    assert info.status == "validating"
    assert batch_api.batches[info.id]["metadata"] == {"relgrade_job": "1"}  # sent with it
    assert (await client.retrieve(info.id)).status == "in_progress"
    done = await client.retrieve(info.id)
    assert done.status == "completed"  # (one of TERMINAL_STATUSES)
    assert (done.total, done.completed, done.failed) == (3, 2, 1)
    assert done.output_file_id is not None and done.error_file_id is not None
    out = [json.loads(x) for x in (await client.download(done.output_file_id)).splitlines()]
    assert [x["custom_id"] for x in out] == ["sha256:0", "sha256:1"]
    err = [json.loads(x) for x in (await client.download(done.error_file_id)).splitlines()]
    assert err[0]["custom_id"] == "sha256:2" and err[0]["response"]["status_code"] == 500
    found = await client.find_by_input_file(file_id)
    assert found is not None and found.id == info.id
    assert await client.find_by_input_file("file-none") is None
    await client.close()


async def test_transient_errors_are_retried_and_others_raise(batch_api: FakeBatchAPI) -> None:
    client = BatchClient(
        base_url=batch_api.server.base_url,
        api_key="sk-test",
        policy=RetryPolicy(base_delay=0.001, max_delay=0.01),
    )
    batch_api.fail_next.extend([503, 429])
    file_id = await client.upload(b'{"custom_id":"k"}\n', filename="x.jsonl")
    assert file_id in batch_api.files and batch_api.counts["faults"] == 2
    batch_api.fail_next.append(404)
    with pytest.raises(JudgeError, match="status failed"):
        await client.retrieve("batch-x")
    assert batch_api.counts["faults"] == 3
    await client.close()
