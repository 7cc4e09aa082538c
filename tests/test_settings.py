"""One settings path for `grade`, `regrade` and `batch` (grader/cli/flags.py): one placeholder
key and one key rule for the library and the CLI, limiters shared per model and base URL in both
`grade` and `regrade`, and secrets masked one way everywhere."""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

import pytest

from grader.batch.adapter import LLMBatchJudge, job_config
from grader.batch.api.client import BatchClient
from grader.cli.batch_common import JudgeFactory
from grader.cli.main import build_parser, main
from grader.errors import InputError, JudgeError
from grader.grading.run import _mask
from grader.job.endpoint import Environment, Settings
from grader.job.judges import GradeJudges
from grader.judges.llm import endpoint
from grader.judges.llm.endpoint import PLACEHOLDER_KEY, api_key_for, is_loopback, is_openai
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Judgment, JudgmentError, Query
from grader.prompts import load_prompt
from grader.redact import MASK, redact
from grader.store.store import Store
from grader.store.writer import StoreWriter
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files

REMOTE = "http://gpu-box:8000/v1"
SECRET = "sk-test-SETTINGS-9d8c7b6a"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


def _args(*words: str) -> argparse.Namespace:
    return build_parser().parse_args(list(words))


# ---- one key rule, one placeholder ---------------------------------------------------------


def test_host_classes() -> None:
    assert is_openai(None) and is_openai("https://api.openai.com/v1")
    assert not is_openai(REMOTE) and not is_openai("http://localhost:11434/v1")
    for url in ("http://localhost:8000/v1", "http://127.0.0.1:1/v1", "http://127.3.4.5/v1"):
        assert is_loopback(url), url
    assert is_loopback("http://[::1]:8000/v1")
    for other in (REMOTE, "http://192.0.2.7:8000/v1", "https://api.openai.com/v1", None):
        assert not is_loopback(other), other


@pytest.mark.usefixtures("no_env")
def test_a_keyless_remote_server_gets_the_one_placeholder_everywhere() -> None:
    assert api_key_for(REMOTE, None) == PLACEHOLDER_KEY
    # The library's judge and batch client, and the CLI's settings: the same key.
    judge = LLMJudge(model="m", prompt="passage-v1", base_url=REMOTE)
    batch = BatchClient(base_url=REMOTE)
    settings = Settings.from_args(
        _args("grade", "--queries", "q", "--docs", "d", "--run", "r", "--base-url", REMOTE)
    )
    assert judge.client.api_key == batch.client.api_key == settings.key == PLACEHOLDER_KEY
    assert settings.secrets == []  # the placeholder is no secret
    regrade = Settings.from_args(
        _args("regrade", "--store", "s", "--prompt", "p", "--base-url", REMOTE)
    )
    assert regrade.key == PLACEHOLDER_KEY


@pytest.mark.usefixtures("no_env")
def test_openai_without_a_key_is_an_error_naming_the_variable() -> None:
    with pytest.raises(JudgeError, match="OPENAI_API_KEY"):
        api_key_for("https://api.openai.com/v1", None)
    with pytest.raises(JudgeError, match="OPENAI_API_KEY"):
        LLMJudge(model="m", prompt="passage-v1", base_url="https://api.openai.com/v1")
    with pytest.raises(JudgeError, match="OPENAI_API_KEY"):
        BatchClient()
    settings = Settings.from_args(_args("grade", "--queries", "q", "--docs", "d", "--run", "r"))
    with pytest.raises(InputError, match="OPENAI_API_KEY"):
        _ = settings.key
    # A dry run sends nothing, so it needs no key.
    dry = Settings.from_args(
        _args("grade", "--queries", "q", "--docs", "d", "--run", "r", "--dry-run")
    )
    assert dry.key == PLACEHOLDER_KEY


def test_environment_is_read_and_checked_in_one_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", REMOTE)
    monkeypatch.setenv("RELGRADE_MODEL", "llama-3")
    monkeypatch.setenv("RELGRADE_PRICES", "")  # empty counts as unset
    env = Environment()
    assert SECRET not in repr(env)  # the key is a SecretStr
    settings = Settings.from_args(_args("regrade", "--store", "s", "--prompt", "p"), env)
    assert (settings.base_url, settings.key, settings.model()) == (REMOTE, SECRET, "llama-3")
    assert settings.model("other") == "other"
    monkeypatch.setenv("OPENAI_BASE_URL", "gpu-box:8000")
    with pytest.raises(InputError, match="OPENAI_BASE_URL"):
        Settings.from_args(_args("regrade", "--store", "s", "--prompt", "p"))


def _own_name_on_loopback(monkeypatch: pytest.MonkeyPatch) -> str:
    """This machine's name when it resolves to 127.0.0.1 (so the fake server answers on it),
    made to look like another host's: the key rule's lookup of names is told it resolves to
    nothing local (as a remote host's name would); else skip."""
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        pytest.skip("the host name does not resolve")
    monkeypatch.setattr(endpoint, "resolved", lambda host: [])
    if address != "127.0.0.1" or is_loopback(f"http://{name}/") or "." in name:
        pytest.skip(f"the host name {name!r} does not serve as a remote-looking name here")
    return name


@pytest.mark.usefixtures("no_env")
def test_grade_cli_accepts_a_keyless_server_on_another_host_name(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _own_name_on_loopback(monkeypatch)
    url = fake_server.base_url.replace(fake_server.host, name)
    assert not is_loopback(url) and not is_openai(url)
    files = write_grade_files(tmp_path)
    out = tmp_path / "j.jsonl"
    code = main(
        files.args("--base-url", url, "--store", tmp_path / "s.db", "--out", out, "--quiet")
    )
    assert code == 0
    assert fake_server.counts["requests"] == files.n_pairs
    assert {h.get("authorization") for h in fake_server.headers} == {f"Bearer {PLACEHOLDER_KEY}"}
    assert len(out.read_text().splitlines()) == files.n_pairs


# ---- limiters: one per model and base URL, in grade and regrade ----------------------------


@pytest.mark.usefixtures("no_env")
def test_grade_shares_one_limiter_per_model(tmp_path: Path) -> None:
    args = _args(
        "grade",
        "--queries",
        "q",
        "--docs",
        "d",
        "--run",
        "r",
        "--base-url",
        REMOTE,
        "--model",
        "a",
        "b",
        "--verify-low",
        "--verify-prompt",
        "code",
        "--rpm",
        "60",
    )
    judges = GradeJudges(args, {}, StoreWriter(None), print)
    first, second = judges.members
    assert isinstance(first, LLMJudge) and isinstance(second, LLMJudge)
    assert isinstance(judges.verifier, LLMJudge) and judges.verifier.model == "a"
    assert judges.verifier.limiter is first.limiter  # same model, same server: one limiter
    assert second.limiter is not first.limiter
    assert first.limiter.rpm == 60


@pytest.mark.usefixtures("no_env")
def test_regrade_shares_one_limiter_per_model_with_its_batch_jobs(tmp_path: Path) -> None:
    args = _args(
        "regrade", "--store", "s", "--prompt", "passage", "--base-url", REMOTE, "--tpm", "1000"
    )
    factory = JudgeFactory(args, StoreWriter(None))
    live = factory.llm("a", load_prompt("passage"))
    # The judge rebuilt for a stored job of another prompt, same model: the same limiter.
    stored = LLMBatchJudge(LLMJudge(model="a", prompt="code", base_url=REMOTE))
    rebuilt = factory.for_job(job_config(stored, "code"))
    assert rebuilt.live is not live and rebuilt.live.limiter is live.limiter
    assert factory.llm("b", load_prompt("passage")).limiter is not live.limiter
    assert live.limiter.tpm == 1000
    # Another base URL is another server, with its own limits.
    other = Settings.from_args(
        _args("regrade", "--store", "s", "--prompt", "p", "--base-url", "http://other-box:8000/v1")
    )
    assert other.limiter("a") is not live.limiter


# ---- secrets: masked one way everywhere ------------------------------------------------------


def test_masking_is_identical_everywhere(fake_server: FakeServer, tmp_path: Path) -> None:
    text = f"invalid request from api key {SECRET}"
    expected = redact(text, [SECRET])
    assert expected == f"invalid request from api key {MASK}" and MASK == "[redacted]"

    # The LLM judge's failed judgment (the server echoes the key back).
    fake_server.enqueue(faults.error(400, text))
    judge = LLMJudge(
        model="m",
        prompt="passage-v1",
        base_url=fake_server.base_url,
        api_key=SECRET,
        max_attempts=1,
    )
    judged = asyncio.run(
        judge.judge(Query(query_id="q", text="t"), Doc(doc_id="d", text="x"), key="k")
    )
    assert judged.error is not None and judged.error.message.endswith(expected)

    # The grading run's defence in depth.
    failed = Judgment(
        query_id="q",
        doc_id="d",
        status="failed",
        judge="openai:m",
        key="k2",
        error=JudgmentError(type="X", message=text),
    )
    masked = _mask(failed, [SECRET])
    assert masked.error is not None and masked.error.message == expected

    # The store's rows.
    with Store(tmp_path / "s.db", secrets=[SECRET]) as store:
        store.put_many([(failed, None)])
        (stored,) = store.get_many(["k2"]).values()
    assert stored.error is not None and stored.error.message == expected
    assert SECRET.encode() not in (tmp_path / "s.db").read_bytes()


# ---- which key goes where: none to loopback unless asked for (--api-key-env) -------------------


def _auth(server: FakeServer) -> set[str | None]:
    return {h.get("authorization") for h in server.headers}


def _grade(files: GradeFiles, server_url: str, store: Path, *extra: str) -> int:
    return main(files.args("--base-url", server_url, "--store", store, "--quiet", *extra))


@pytest.mark.slow
def test_grade_sends_no_key_to_a_loopback_server_unless_asked(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    files = write_grade_files(tmp_path)
    assert _grade(files, fake_server.base_url, tmp_path / "a.db") == 0
    assert fake_server.counts["requests"] == files.n_pairs
    assert _auth(fake_server) == {f"Bearer {PLACEHOLDER_KEY}"}  # OPENAI_API_KEY stayed home

    fake_server.reset()
    code = _grade(files, fake_server.base_url, tmp_path / "b.db", "--api-key-env", "OPENAI_API_KEY")
    assert code == 0
    assert _auth(fake_server) == {f"Bearer {SECRET}"}

    fake_server.reset()
    monkeypatch.setenv("LOCAL_VLLM_KEY", "local-token-5e4d")
    code = _grade(files, fake_server.base_url, tmp_path / "c.db", "--api-key-env", "LOCAL_VLLM_KEY")
    assert code == 0
    assert _auth(fake_server) == {"Bearer local-token-5e4d"}
    assert b"local-token-5e4d" not in (tmp_path / "c.db").read_bytes()


def test_grade_sends_the_key_to_a_server_on_another_host_name(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _own_name_on_loopback(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    files = write_grade_files(tmp_path)
    url = fake_server.base_url.replace(fake_server.host, name)
    assert _grade(files, url, tmp_path / "s.db") == 0
    assert _auth(fake_server) == {f"Bearer {SECRET}"}


def test_an_unset_api_key_env_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    files = write_grade_files(tmp_path)
    url = "http://127.0.0.1:9/v1"
    code = _grade(files, url, tmp_path / "s.db", "--api-key-env", "NO_SUCH_KEY_VAR")
    assert code == 2
    assert "NO_SUCH_KEY_VAR" in capsys.readouterr().err


@pytest.mark.slow
def test_regrade_sends_no_key_to_a_loopback_server_unless_asked(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    files = write_grade_files(tmp_path)
    store = tmp_path / "s.db"
    assert _grade(files, fake_server.base_url, store) == 0
    regrade = ["regrade", "--store", str(store), "--base-url", fake_server.base_url, "--quiet"]
    fake_server.reset()
    assert main([*regrade, "--prompt", "code"]) == 0
    assert fake_server.counts["requests"] == files.n_pairs
    assert _auth(fake_server) == {f"Bearer {PLACEHOLDER_KEY}"}
    fake_server.reset()
    assert (
        main(
            [*regrade, "--prompt", "passage-v1", "--model", "m2", "--api-key-env", "OPENAI_API_KEY"]
        )
        == 0
    )
    assert fake_server.counts["requests"] == files.n_pairs
    assert _auth(fake_server) == {f"Bearer {SECRET}"}


@pytest.mark.parametrize(
    "words",
    [
        ["batch", "collect", "--store", "s"],
        ["batch", "status", "--store", "s"],
        ["regrade", "--store", "s", "--prompt", "p"],
    ],
)
def test_batch_and_regrade_read_the_key_the_same_way(
    words: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OTHER_KEY", "other-9f8e")
    local = Settings.from_args(_args(*words, "--base-url", "http://localhost:8000/v1"))
    assert local.key == PLACEHOLDER_KEY and local.secrets == []
    asked = _args(*words, "--base-url", "http://localhost:8000/v1", "--api-key-env", "OTHER_KEY")
    assert Settings.from_args(asked).key == "other-9f8e"
    remote = Settings.from_args(_args(*words, "--base-url", REMOTE))
    assert remote.key == SECRET and remote.secrets == [SECRET]
    assert Settings.from_args(_args(*words)).key == SECRET  # OpenAI itself
    batch = Settings.from_args(_args(*words, "--base-url", "http://[::1]:8000/v1")).batch_client()
    assert batch.client.api_key == PLACEHOLDER_KEY
