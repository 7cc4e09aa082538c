"""Results in the exact shape vLLM's run-batch writes them (issue 38, point 2): its
`BatchRequestOutput` lines as pydantic dumps them (compact, non-ASCII written raw), an
`ErrorResponse` whose reason sits at `error.error.message` / `error.error.code`, and string
errors. Each error is stored with its status and reason; a permanent one (400: past the context,
404: a model the engine does not serve) is not asked again by `--reask`, a transient one (500)
is. And an export in an output mode batch engines drop is refused, with the reason."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.judges.failures import failure_kind
from grader.models import JudgmentError
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export

REASON = "Très pertinent : le passage répond — 関連あり"
CONTEXT = (
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
    "(8700 in the messages, 300 in the completion). Please reduce the length of the messages "
    "or completion."
)


def _vllm_line(custom_id: str, body: dict[str, Any] | None, error: Any, status: int) -> str:
    """A line as vLLM's run-batch writes it: `BatchRequestOutput.model_dump_json()`."""
    record = {
        "id": f"vllm-{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": {
            "status_code": status,
            "request_id": f"vllm-batch-{uuid.uuid4().hex}",
            "body": body,
        },
        "error": error,
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _error_response(message: str, kind: str, code: int) -> dict[str, Any]:
    """vLLM's `ErrorResponse`: the reason one level down, `code` the HTTP status."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _ok_body(server: FakeServer, request: dict[str, Any]) -> dict[str, Any]:
    """A ChatCompletionResponse as vLLM dumps it: the reply and vLLM's own fields."""
    body = server.completion_for(request)
    choice = body["choices"][0]
    # The model writes its JSON with the characters themselves, not \u escapes.
    content = json.dumps(json.loads(choice["message"]["content"]), ensure_ascii=False)
    choice["message"].update({"content": content, "tool_calls": [], "reasoning_content": None})
    choice.update({"stop_reason": None})
    body.update({"prompt_logprobs": None, "kv_transfer_params": None})
    return body


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=2, depth=4)  # 8 pairs


def test_vllm_lines_store_the_status_and_reason_and_reask_only_what_may_change(
    files: GradeFiles,
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fake_server, "reason", REASON)
    db = tmp_path / "s.db"
    (requests,) = cli_export(files, db, tmp_path / "out")
    lines = [json.loads(x) for x in requests.read_text().splitlines()]
    errors = {
        1: (_error_response(CONTEXT, "BadRequestError", 400), 400),
        2: (_error_response("The model `other-model` does not exist.", "NotFoundError", 404), 404),
        3: (_error_response("Engine loop died", "InternalServerError", 500), 500),
        4: ("Request must not be sent in stream mode", 400),
    }
    results = tmp_path / "results.jsonl"
    with results.open("w", encoding="utf-8") as fh:
        for i, line in enumerate(lines):
            if i in errors:
                fh.write(_vllm_line(line["custom_id"], None, *errors[i]))
            else:
                fh.write(
                    _vllm_line(line["custom_id"], _ok_body(fake_server, line["body"]), None, 200)
                )
    assert not results.read_bytes().isascii()  # the reason written raw, as vLLM writes it

    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), str(results), "--quiet"]) == 1
    assert "4 ok, 4 failed (Batch:http_400 2, Batch:http_404 1, Batch:http_500 1)" in (
        capsys.readouterr().err
    )
    key = {i: line["custom_id"].split(":", 2)[2] for i, line in enumerate(lines)}
    with Store(db) as store:
        stored = store.get_many(key.values())
    assert {stored[key[i]].reason for i in (0, 5, 6, 7)} == {REASON}
    said: dict[int, JudgmentError] = {}
    for i in errors:
        failure = stored[key[i]].error
        assert failure is not None
        said[i] = failure
    assert said[1].type == "Batch:http_400"
    assert said[1].message == f"results.jsonl line 2: HTTP 400 BadRequestError: {CONTEXT}"
    assert said[2].type == "Batch:http_404" and "`other-model` does not exist" in said[2].message
    assert said[3].message.endswith("HTTP 500 InternalServerError: Engine loop died")
    assert said[4].message.endswith("HTTP 400: Request must not be sent in stream mode")
    kinds = {i: failure_kind(e) for i, e in said.items()}
    assert kinds == {1: "permanent", 2: "permanent", 3: "transient", 4: "permanent"}

    # --reask asks the transient one alone: the others would fail (and be paid) again.
    fake_server.reset()
    url = ["--base-url", fake_server.base_url]
    assert main(["batch", "import", "--store", str(db), str(results), "--reask", *url]) == 1
    assert fake_server.counts["requests"] == 1
    err = capsys.readouterr().err
    assert "asked live: 1 ok, 0 failed again; 3 not asked (refused for good" in err
    fake_server.reset()
    assert main(["batch", "import", "--store", str(db), str(results), "--reask", *url]) == 1
    assert fake_server.counts["requests"] == 0  # stored for good: not paid a third time


@pytest.mark.parametrize(
    ("error_type", "message", "kind"),
    [
        ("Batch:http_400", "HTTP 400 BadRequestError: bad", "permanent"),
        ("Batch:http_404", "HTTP 404 NotFoundError: no such model", "permanent"),
        ("Batch:http_422", "HTTP 422", "permanent"),
        ("Batch:http_429", "HTTP 429", "transient"),
        ("Batch:http_503", "HTTP 503", "transient"),
        ("Batch:missing", "no results line", "transient"),
        ("Batch:batch_expired", "expired", "transient"),
        ("Batch:batch_error", "the model's maximum context length is 8192", "permanent"),
    ],
)
def test_the_kind_of_a_batch_failure(error_type: str, message: str, kind: str) -> None:
    assert failure_kind(JudgmentError(type=error_type, message=message)) == kind


@pytest.mark.parametrize("mode", ["vllm_guided_json", "ollama_format"])
def test_an_export_in_a_mode_batch_engines_drop_is_refused(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    args = ["batch", "export", "--store", str(tmp_path / "s.db"), "--queries", str(files.queries)]
    args += ["--docs", str(files.docs), "--run", str(files.run), *MODEL, "--output-mode", mode]
    assert main([*args, "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"--output-mode {mode} cannot be exported for a batch engine" in err
    assert "json_schema" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "s.db").exists()
    args[args.index(mode)] = "vllm_structured_outputs"  # a mode vLLM honours is exported
    assert main([*args, "--out-dir", str(tmp_path / "out"), "--quiet"]) == 0
