"""The fake server itself, through the real openai SDK: what the judge tests rely on."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema

from tests.fakeserver import FakeServer, default_grade, faults

MODEL = "fake-model"
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Grade relevance 0..3."},
    {"role": "user", "content": "query: cats\ndocument: cats purr"},
]
BODY: dict[str, Any] = {"model": MODEL, "messages": MESSAGES}


def client(server: FakeServer, timeout: float = 5.0) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=timeout)


async def test_default_reply_is_a_deterministic_grade_in_json_schema_mode(
    fake_server: FakeServer,
) -> None:
    fmt: ResponseFormatJSONSchema = {
        "type": "json_schema",
        "json_schema": {"name": "grade", "schema": {}},
    }
    raw = await client(fake_server).chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, response_format=fmt, logprobs=True, top_logprobs=5
    )
    body = json.loads(raw.http_response.text)
    content = json.loads(body["choices"][0]["message"]["content"])
    assert content["grade"] == default_grade(BODY)
    tokens = body["choices"][0]["logprobs"]["content"]
    grade_token = next(t for t in tokens if t["token"] == str(content["grade"]))
    assert math.isclose(math.exp(grade_token["logprob"]), 0.8)
    assert len(grade_token["top_logprobs"]) == 5
    assert body["usage"]["prompt_tokens"] > 0
    assert fake_server.counts == {"requests": 1, "ok": 1}
    assert fake_server.requests[0]["response_format"] == fmt


async def test_text_mode_ends_with_a_grade_line(fake_server: FakeServer) -> None:
    reply = await client(fake_server).chat.completions.create(model=MODEL, messages=MESSAGES)
    content = reply.choices[0].message.content or ""
    assert content.splitlines()[-1] == f"Grade: {default_grade(BODY)}"
    assert reply.choices[0].logprobs is None


async def test_rate_limit_carries_retry_after(fake_server: FakeServer) -> None:
    fake_server.enqueue(faults.rate_limited(retry_after="7"))
    with pytest.raises(openai.RateLimitError) as caught:
        await client(fake_server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert caught.value.response.headers["retry-after"] == "7"
    assert fake_server.counts["status:429"] == 1
    reply = await client(fake_server).chat.completions.create(
        model=MODEL, messages=MESSAGES
    )  # queue drained
    assert reply.choices[0].finish_reason == "stop"


async def test_drop_and_slow_surface_as_connection_and_timeout_errors(
    fake_server: FakeServer,
) -> None:
    fake_server.enqueue(faults.drop(), faults.slow(2.0))
    with pytest.raises(openai.APIConnectionError):
        await client(fake_server).chat.completions.create(model=MODEL, messages=MESSAGES)
    with pytest.raises(openai.APITimeoutError):
        await client(fake_server, timeout=0.2).chat.completions.create(
            model=MODEL, messages=MESSAGES
        )


async def test_content_faults(fake_server: FakeServer) -> None:
    fake_server.enqueue(faults.refusal(), faults.truncated(), faults.bad_grade(9))
    c = client(fake_server)
    refused = await c.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert refused.choices[0].message.refusal and refused.choices[0].message.content is None
    cut = await c.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert cut.choices[0].finish_reason == "length"
    bad = await c.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert (bad.choices[0].message.content or "").endswith("Grade: 9")


async def test_reject_formats_is_persistent(fake_server: FakeServer) -> None:
    fake_server.reject_formats = {"json_schema"}
    fmt: ResponseFormatJSONSchema = {
        "type": "json_schema",
        "json_schema": {"name": "grade", "schema": {}},
    }
    for _ in range(2):
        with pytest.raises(openai.BadRequestError, match="json_schema"):
            await client(fake_server).chat.completions.create(
                model=MODEL, messages=MESSAGES, response_format=fmt
            )
    ok = await client(fake_server).chat.completions.create(
        model=MODEL, messages=MESSAGES, response_format={"type": "json_object"}
    )
    assert json.loads(ok.choices[0].message.content or "")["grade"] in range(4)


@pytest.mark.slow
def test_subprocess_mode_prints_its_url() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeserver", "--port", "0", "--latency-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("FAKESERVER http://127.0.0.1:")
        url = line.split()[1]
        sync = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=5)
        reply = sync.chat.completions.create(model=MODEL, messages=MESSAGES)
        assert (reply.choices[0].message.content or "").startswith("Scripted")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_extra_routes_can_be_mounted(fake_server: FakeServer) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    async def batches(request: Request) -> Response:
        fake_server.state["seen"] = await request.json()
        return JSONResponse({"id": "batch_1", "object": "batch"})

    fake_server.add_route("/v1/test-batches", batches, methods=["POST"])
    sync = openai.OpenAI(base_url=fake_server.base_url, api_key="sk-test", max_retries=0)
    reply = sync.post("/test-batches", body={"x": 1}, cast_to=object)
    assert reply == {"id": "batch_1", "object": "batch"}
    assert fake_server.state["seen"] == {"x": 1}
    assert fake_server.counts["requests"] == 0  # chat history is only chat


async def test_error_and_non_json_faults(fake_server: FakeServer) -> None:
    fake_server.enqueue(faults.error(401, "bad key", "invalid_api_key"), faults.not_json_body())
    with pytest.raises(openai.AuthenticationError) as caught:
        await client(fake_server).chat.completions.create(model=MODEL, messages=MESSAGES)
    assert caught.value.code == "invalid_api_key"
    raw = await client(fake_server).chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES
    )
    assert raw.http_response.text.startswith("<html>")
    assert fake_server.counts["status:401"] == 1 and fake_server.counts["not_json_body"] == 1
