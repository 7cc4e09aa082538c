"""bench/real_cost.py's parts that need no real server: the naive client's grade reading (a reply
without a grade is a failure, never a 0), its messages (the shared part first and byte-identical
across pairs, or last with `pair_first`), one request through the real openai SDK to the fake
server, the bench's kappa against scikit-learn, and the server log's prefix-match hits."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import openai
import pytest
from sklearn.metrics import cohen_kappa_score

from tests.fakeserver import FakeServer
from tests.fakeserver_replies import faults

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _bench(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)  # bench/ modules import each other by bare name


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ("The passage answers it.\nGrade: 3", 3),
        ("Grade: 2\n\nThe passage is on the topic but gives no answer.", 2),
        ("**Grade:** 1", 1),
        ("A first guess, grade 1; on reflection the final Grade: 0", 0),
        ("3", 3),
        (" 0.\n", 0),
    ],
)
def test_a_grade_is_read_where_the_reply_gives_one(reply: str, grade: int) -> None:
    assert _bench("real_cost_naive").parse_grade(reply) == grade


@pytest.mark.parametrize(
    "reply",
    [
        "The passage is highly relevant to the query.",
        "",
        None,
        "Grade: 5",
        "Grade: 12",
        "Grade: N",
        "I'm sorry, but I can't help with that request.",
        "0 of the passage's sentences mention the query.",
    ],
)
def test_a_reply_without_a_grade_is_a_failure_never_a_zero(reply: str | None) -> None:
    assert _bench("real_cost_naive").parse_grade(reply) is None


def test_the_naive_messages_share_their_instructions_first() -> None:
    naive = _bench("real_cost_naive")
    a = naive.naive_messages("what is a bond", "A bond is a debt security.")
    b = naive.naive_messages("who wrote hamlet", "Hamlet is a play by Shakespeare.")
    assert [m["role"] for m in a] == ["system", "user"]
    assert a[0] == b[0] and "$" not in a[0]["content"]  # byte-identical, fully rendered
    assert a[1]["content"].startswith("<query>\nwhat is a bond\n</query>")
    assert a[1]["content"].rstrip().endswith("where N is 0, 1, 2 or 3.")
    first = naive.naive_messages("what is a bond", "A bond.", pair_first=True)
    assert len(first) == 1 and first[0]["content"].startswith("<query>\nwhat is a bond")
    assert a[0]["content"] in first[0]["content"]  # the same words, in another order


def test_the_naive_client_counts_a_reply_without_a_grade_as_failed() -> None:
    naive = _bench("real_cost_naive")
    messages = naive.naive_messages("what is a bond", "A bond is a debt security.")
    with FakeServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        server.enqueue(faults.content("The passage defines a bond."), faults.server_error(500))
        no_grade = naive.ask(client, "gpt-4o-mini", messages, max_tokens=300)
        failed = naive.ask(client, "gpt-4o-mini", messages, max_tokens=300)
        graded = naive.ask(client, "gpt-4o-mini", messages, max_tokens=300)  # text: `Grade: N`
        sent = server.requests[-1]
    assert no_grade.grade is None and "no `Grade: N` line" in (no_grade.error or "")
    assert no_grade.prompt_tokens > 0 and no_grade.completion_tokens > 0
    assert failed.grade is None and failed.error and failed.prompt_tokens == 0
    assert graded.grade in (0, 1, 2, 3) and graded.error is None
    assert "response_format" not in sent and not sent.get("logprobs")
    assert sent["temperature"] == 0.0 and sent["max_tokens"] == 300


def test_kappa_and_its_gap_agree_with_scikit_learn() -> None:
    cost = _bench("real_cost")
    rng = np.random.default_rng(3)
    h, a, b = (rng.integers(0, 4, 60) for _ in range(3))
    assert cost.kappa(h, a) == pytest.approx(cohen_kappa_score(h, a), abs=1e-12)
    pairs = [(f"q{i}", "d") for i in range(60)]
    human = dict(zip(pairs, h.tolist(), strict=True))
    arm = dict(zip(pairs, a.tolist(), strict=True)) | {("q0", "d"): None}  # a failure: left out
    naive = dict(zip(pairs, b.tolist(), strict=True))
    gap, low, high = cost.kappa_gap(human, arm, naive, seed=0)
    expected = cohen_kappa_score(h[1:], a[1:]) - cohen_kappa_score(h[1:], b[1:])
    assert gap == pytest.approx(expected, abs=1e-12)
    assert low < gap < high


def test_the_server_log_hits_are_counted_once(tmp_path: Path) -> None:
    cost = _bench("real_cost")
    log = tmp_path / "server.log"
    log.write_text("Llama.generate: 5 prefix-match hit, remaining 1 prompt tokens to eval\n")
    reader = cost.ServerLog(log)  # what was logged before it started is not counted
    with log.open("a") as fh:
        fh.write("INFO: 200 OK\nLlama.generate: 389 prefix-match hit, remaining 80 prompt tokens\n")
        fh.write("Llama.generate: 11 prefix-match hit, remaining 400 prompt tokens to eval\n")
    assert reader.hits() == 400
    assert reader.hits() == 0
    assert cost.ServerLog(None).hits() == 0
