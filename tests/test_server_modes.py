"""Output modes as real servers take them (issue 24, point 2): llama.cpp's 500 for json_schema
and its json_object + schema form, vLLM's and Ollama's own request fields, the switch told once
and stamped on every judgment; a prompt's extra sampling settings reaching the server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from grader.judges.llm.server_settings import ModeSwitch
from grader.output_modes import OutputMode
from grader.prompts import load_prompt, shipped_prompt_files
from tests.fake_flavours import llama_cpp, ollama_native_format, vllm_guided_only
from tests.fakeserver import FakeServer, faults
from tests.helpers.llm_judges import formats, make_judge, pairs


async def test_llama_cpp_500_for_json_schema_moves_the_run_to_json_object_with_schema_once(
    fake_server: FakeServer,
) -> None:
    fake_server.flavour = llama_cpp()
    told: list[ModeSwitch] = []
    judge = make_judge(fake_server, on_switch=told.append)
    results = await asyncio.gather(
        *(judge.judge(q, d, key=f"k{i}") for i, (q, d) in enumerate(pairs(6)))
    )
    assert all(j.status == "ok" for j in results)
    assert {j.output_mode for j in results} == {"json_object_schema"}
    assert formats(fake_server, schema=True).count("json_schema") >= 1
    assert formats(fake_server, schema=True)[-1] == "json_object+schema"
    schema = load_prompt("passage-v1").request_schema("json_object_schema")
    assert fake_server.requests[-1]["response_format"]["schema"] == schema
    assert [(s.from_mode, s.to_mode) for s in told] == [("json_schema", "json_object_schema")]
    assert "HTTP 500" in told[0].reason and "json_object" in told[0].reason
    assert judge.server.switches == told


async def test_a_500_that_names_no_output_format_is_retried_in_the_same_mode(
    fake_server: FakeServer,
) -> None:
    fake_server.enqueue(faults.server_error(500))
    judge = make_judge(fake_server)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert (judgment.status, judgment.attempts, judgment.output_mode) == ("ok", 2, "json_schema")
    assert formats(fake_server) == ["json_schema", "json_schema"]
    assert judge.server.switches == []


async def test_a_500_that_only_quotes_the_output_format_is_retried_in_the_same_mode(
    fake_server: FakeServer,
) -> None:
    quoted = (
        "worker crashed on {'response_format': {'type': 'json_schema', 'json_schema': {...}}}: "
        "CUDA error: out of memory"
    )
    fake_server.enqueue(faults.error(500, quoted, None))
    judge = make_judge(fake_server)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert (judgment.status, judgment.attempts, judgment.output_mode) == ("ok", 2, "json_schema")
    assert formats(fake_server) == ["json_schema", "json_schema"]
    assert judge.server.switches == []


async def test_a_500_saying_the_output_format_is_not_supported_moves_the_run(
    fake_server: FakeServer,
) -> None:
    fake_server.enqueue(faults.error(500, "response_format json_schema is not supported", None))
    judge = make_judge(fake_server)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert (judgment.status, judgment.output_mode) == ("ok", "json_object_schema")
    assert [s.to_mode for s in judge.server.switches] == ["json_object_schema"]


async def test_json_object_with_schema_refused_too_falls_to_plain_json_then_text(
    fake_server: FakeServer,
) -> None:
    fake_server.reject_formats = {"json_schema", "json_object"}
    judge = make_judge(fake_server)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert judgment.status == "ok" and judgment.output_mode == "text"
    assert formats(fake_server, schema=True) == [
        "json_schema",
        "json_object+schema",
        "json_object",
        "text",
    ]
    assert [s.to_mode for s in judge.server.switches] == [
        "json_object_schema",
        "json_object",
        "text",
    ]


@pytest.mark.parametrize(
    ("mode", "flavour", "field", "expected"),
    [
        ("vllm_guided_json", vllm_guided_only, "guided_json", lambda s: s),
        ("vllm_structured_outputs", vllm_guided_only, "structured_outputs", lambda s: {"json": s}),
        ("ollama_format", ollama_native_format, "format", lambda s: s),
    ],
)
async def test_vendor_modes_send_the_schema_in_their_documented_field(
    fake_server: FakeServer, mode: OutputMode, flavour: Any, field: str, expected: Any
) -> None:
    fake_server.flavour = flavour
    judge = make_judge(fake_server, output_mode=mode)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    body = fake_server.requests[0]
    assert judgment.status == "ok" and judgment.output_mode == mode
    assert body[field] == expected(judge.prompt.request_schema(mode))
    assert "response_format" not in body
    assert judge.build_request(*pairs(1)[0])[field] == body[field]  # a batch line sends it too


async def test_a_grammar_mode_bounds_the_reason_so_the_reply_fits_max_tokens(
    fake_server: FakeServer,
) -> None:
    """A small model under llama.cpp's grammar may write its reason until max_tokens cuts the
    reply off (no grade); in a grammar mode the reason's schema carries a maxLength that leaves
    room for the grade. OpenAI's strict json_schema gets the prompt's schema as written."""
    spec = load_prompt("passage-v1")
    assert "maxLength" not in spec.schema["properties"]["reason"]
    strict = spec.response_format("json_schema")
    assert strict is not None and strict["json_schema"]["schema"] == spec.schema
    for mode in ("json_object_schema", "vllm_guided_json", "ollama_format"):
        reason = spec.request_schema(mode)["properties"]["reason"]
        assert reason["maxLength"] == 3 * (spec.max_tokens - 30)
        assert (
            spec.request_schema(mode)["properties"]["grade"] == spec.schema["properties"]["grade"]
        )
    judge = make_judge(fake_server, output_mode="json_object_schema")
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert judgment.status == "ok"
    sent = fake_server.requests[0]["response_format"]["schema"]["properties"]["reason"]
    assert sent["maxLength"] == 810


def test_a_schema_bound_keeps_a_length_the_prompt_file_sets() -> None:
    from grader.output_modes import bounded_strings

    schema = {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 120},
            "evidence": {"type": "string"},
            "grade": {"type": "integer"},
        },
    }
    bounded = bounded_strings(schema, 300)["properties"]
    assert bounded["reason"] == {"type": "string", "maxLength": 120}
    assert bounded["evidence"] == {"type": "string", "maxLength": 810}
    assert bounded_strings({"type": "object"}, 300) == {"type": "object"}
    assert bounded_strings(schema, 10)["properties"]["evidence"]["maxLength"] == 1


async def test_a_vendor_field_refused_falls_back_to_json_object(fake_server: FakeServer) -> None:
    fake_server.enqueue(faults.error(400, "unknown field guided_json", None))
    judge = make_judge(fake_server, output_mode="vllm_guided_json")
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert judgment.status == "ok" and judgment.output_mode == "json_object"
    assert [(s.from_mode, s.to_mode) for s in judge.server.switches] == [
        ("vllm_guided_json", "json_object")
    ]


def _prompt_with_extra(tmp_path: Path) -> Path:
    source = next(p for p in shipped_prompt_files() if p.stem == "passage-v1")
    path = tmp_path / "passage-v9.toml"
    text = source.read_text().replace('version = "1"', 'version = "9"')
    path.write_text(text + "\n[sampling.extra]\nrepeat_penalty = 1.0\ntop_k = 1\n")
    return path


async def test_a_prompt_files_extra_sampling_reaches_the_server(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    judge = make_judge(fake_server, prompt=str(_prompt_with_extra(tmp_path)))
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert judgment.status == "ok"
    assert fake_server.requests[0]["repeat_penalty"] == 1.0
    assert fake_server.requests[0]["top_k"] == 1
    assert judge.fingerprint()["sampling"]["extra"] == {"repeat_penalty": 1.0, "top_k": 1}
    assert "extra" not in load_prompt("passage-v1").sampling()  # other keys stay as they were
