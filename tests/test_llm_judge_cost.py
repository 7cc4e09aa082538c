"""The price table, the cost of a Usage, and the dry-run estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cost import (
    CHARS_PER_TOKEN,
    PriceTable,
    estimate_tokens,
    estimate_usage,
    spend_text,
)
from grader.errors import InputError
from grader.grading.budget import estimate_requests
from grader.grading.pairs import Pair
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query, Usage


def test_cost_by_hand() -> None:
    table = PriceTable.from_files()
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=500_000, cached_tokens=400_000)
    # gpt-4o-mini: 0.15 input, 0.075 cached input, 0.60 output per 1M tokens.
    live = 0.6 * 0.15 + 0.4 * 0.075 + 0.5 * 0.60
    assert table.cost("gpt-4o-mini", usage) == pytest.approx(live)
    assert table.cost("gpt-4o-mini", usage, batch=True) == pytest.approx(live * 0.5)
    assert table.batch_discount == 0.5


def test_dated_snapshots_use_their_model_price_and_nothing_else_does() -> None:
    table = PriceTable.from_files()
    assert table.price("gpt-4o-mini-2024-07-18") == table.price("gpt-4o-mini")
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o")
    assert table.price("gpt-4.1-mini-latest") == table.price("gpt-4.1-mini")
    assert table.price("gpt-4o-minimal") is None
    assert table.price("gpt-4o-audio-preview") is None


def test_unknown_model_costs_none_with_a_note() -> None:
    table = PriceTable.from_files()
    assert table.cost("llama3.1:8b", Usage(prompt_tokens=10)) is None
    assert table.price("llama3.1:8b") is None and table.price("gpt-4o") is not None
    assert "--prices" in spend_text(0.0, 1)  # what the summary says of its cost


def test_user_file_and_env_override_and_extend(tmp_path: Path) -> None:
    """$RELGRADE_PRICES's file, then --prices's (the endpoint settings pass both)."""
    env_file = tmp_path / "env.toml"
    env_file.write_text('[models."llama3"]\ninput = 0.0\noutput = 0.0\n')
    arg_file = tmp_path / "mine.toml"
    arg_file.write_text('batch_discount = 0.4\n[models."gpt-4o-mini"]\ninput = 1.0\noutput = 2.0\n')
    table = PriceTable.from_files(env_file, arg_file)
    assert table.cost("llama3", Usage(prompt_tokens=99)) == 0.0
    mini = table.price("gpt-4o-mini")
    assert mini is not None and (mini.input, mini.cached_input, mini.output) == (1.0, 1.0, 2.0)
    assert table.batch_discount == 0.4
    assert table.price("gpt-4o") == PriceTable.from_files().price("gpt-4o")
    assert table.sources == ("grader/prices.toml", str(env_file), str(arg_file))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models."m"]\ninput = "cheap"\noutput = 1\n', "needs numbers `input` and `output`"),
        ('[models."m"]\ninput = 1\n', "needs numbers"),
        ("batch_discount = 2\n", "must be a number in"),
        ("models = [", "not valid TOML"),
    ],
)
def test_bad_price_files_name_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        PriceTable.from_files(path)
    assert str(path) in str(caught.value)


def test_estimate_counts_four_characters_per_token() -> None:
    assert CHARS_PER_TOKEN == 4
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    messages = [{"role": "system", "content": "x" * 40}, {"role": "user", "content": "y" * 8}]
    assert estimate_usage(messages, 300) == Usage(
        prompt_tokens=10 + 4 + 2 + 4, completion_tokens=300
    )


def test_judge_estimate_prices_the_rendered_request() -> None:
    table = PriceTable.from_files()
    judge = LLMJudge(
        model="gpt-4o",
        prompt="passage-v1",
        base_url="http://127.0.0.1:9/v1",
        api_key="x",
        prices=table,
    )
    query, doc = Query(query_id="q", text="cats"), Doc(doc_id="d", text="Cats purr. " * 50)
    usage = estimate_usage(judge.build_request(query, doc)["messages"], 300)
    assert judge.estimate_cost(query, doc) == pytest.approx(table.cost("gpt-4o", usage))
    assert judge.estimate_cost(query, doc, batch=True) == pytest.approx(
        0.5 * (table.cost("gpt-4o", usage) or 0)
    )


def test_dry_run_counts_the_tokens_of_each_request() -> None:
    """`estimate_requests` (grade's and regrade's --dry-run) sums each LLM request's prompt
    tokens and its reply at the ceiling; a judge that sends nothing adds none."""
    judge = LLMJudge(model="gpt-4o", prompt="passage-v1", base_url="http://127.0.0.1:9/v1")
    query, doc = Query(query_id="q", text="cats"), Doc(doc_id="d", text="Cats purr. " * 50)
    one = estimate_usage(judge.build_request(query, doc)["messages"], judge.prompt.max_tokens)
    summed = estimate_requests([(judge, Pair(query, doc))] * 3)
    assert (summed.prompt_tokens, summed.completion_tokens) == (
        3 * one.prompt_tokens,
        3 * judge.prompt.max_tokens,
    )
    assert one.prompt_tokens > 0
