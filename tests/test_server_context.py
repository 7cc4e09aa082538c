"""Context limits and what `/v1/models` tells (issue 24, points 4 and 7): a document cut to the
server's context with the truncation flag; a prompt the server still finds too long fails for
good under its own cause, sent once; a model the server does not list is told."""

from __future__ import annotations

from grader.judges.failures import failure_cause, failure_kind
from grader.judges.llm.context import read_models
from grader.models import Doc, JudgmentError, Query
from tests.fake_flavours import llama_cpp
from tests.fakeserver import FakeServer
from tests.helpers.llm_judges import make_judge

QUERY = Query(query_id="q1", text="what do cats eat")
LONG = Doc(doc_id="d1", text="Cats eat fish and mice. " * 300)  # ~7,200 characters


async def test_a_prompt_past_the_context_is_one_request_and_a_permanent_failure(
    fake_server: FakeServer,
) -> None:
    fake_server.flavour = llama_cpp(n_ctx=1024)
    judge = make_judge(fake_server, output_mode="json_object_schema")
    judgment = await judge.judge(QUERY, LONG, key="k")
    assert (judgment.status, judgment.attempts) == ("failed", 1)
    assert fake_server.counts["requests"] == 1
    assert failure_kind(judgment.error) == "permanent"
    assert failure_cause(judgment.error) == "context length exceeded"


async def test_max_context_cuts_the_document_to_fit_and_flags_it(fake_server: FakeServer) -> None:
    fake_server.flavour = llama_cpp(n_ctx=1024)
    judge = make_judge(fake_server, output_mode="json_object_schema", max_context=1024)
    judgment = await judge.judge(QUERY, LONG, key="k")
    assert judgment.status == "ok" and judgment.truncated
    sent = fake_server.requests[0]["messages"][1]["content"]
    assert "[... document truncated ...]" in sent
    assert len(sent) < len(LONG.text)


async def test_a_short_document_is_not_cut_by_a_context_it_fits(fake_server: FakeServer) -> None:
    judge = make_judge(fake_server, max_context=1024)
    judgment = await judge.judge(QUERY, Doc(doc_id="d2", text="Cats eat fish."), key="k")
    assert judgment.status == "ok" and not judgment.truncated


async def test_the_context_and_models_come_from_v1_models(fake_server: FakeServer) -> None:
    fake_server.models = {"data": [{"id": "smollm2", "meta": {"n_ctx": 1024}}]}
    fake_server.flavour = llama_cpp(n_ctx=1024)
    notices: list[str] = []
    judge = make_judge(
        fake_server, output_mode="json_object_schema", probe_server=True, on_notice=notices.append
    )
    first = await judge.judge(QUERY, LONG, key="k")
    await judge.judge(QUERY, LONG, key="k2")
    assert first.status == "ok" and first.truncated
    assert judge.fit.max_context == 1024
    assert len(notices) == 1  # told once, not per pair
    assert "smollm2" in notices[0] and "'fake-model'" in notices[0]


def test_read_models_takes_each_servers_context_field() -> None:
    assert read_models({"data": [{"id": "m", "max_model_len": 4096}]}).context == 4096  # vLLM
    assert read_models({"data": [{"id": "m", "meta": {"n_ctx_train": 8192}}]}).context == 8192
    nothing = read_models({"data": [{"id": "m"}]})
    assert (nothing.models, nothing.context) == (("m",), None)
    assert read_models("not an object").models == ()


def test_failure_kinds_are_not_transient_by_default() -> None:
    def kind(kind: str, message: str) -> str:
        return failure_kind(JudgmentError(type=kind, message=message))

    assert kind("SomethingNew", "what happened") == "unknown"
    assert kind("APITimeoutError", "Request timed out") == "transient"
    ensemble = "every judge failed (a: InvalidReply: length: cut off; b: InvalidReply: schema: x)"
    assert kind("EnsembleFailed", ensemble) == "invalid"
    mixed = "every judge failed (a: InvalidReply: length: cut; b: APITimeoutError: timed out)"
    assert kind("EnsembleFailed", mixed) == "transient"
    stuck = "every judge failed (a: BadRequestError: 400 no; b: ContextLengthExceeded: 400 long)"
    assert kind("EnsembleFailed", stuck) == "permanent"
