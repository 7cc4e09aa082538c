"""The judges relgrade ships, registered by name: `llm` (any OpenAI-compatible model) and
`lexical` (offline, BM25-style). Each factory imports its judge only when called, so listing the
judges loads neither the openai SDK nor the lexical tokenizer."""

from __future__ import annotations

from grader.errors import InputError
from grader.judges.base import Judge
from grader.judges.registry import JudgeSettings, register_judge


def llm_judge(settings: JudgeSettings) -> Judge:
    """An LLM judge of `settings.model` (else the endpoint's default) and `settings.prompt`."""
    if settings.endpoint is None or settings.prompt is None:
        raise InputError("the llm judge needs an endpoint and a prompt")
    model = settings.endpoint.model(settings.model)
    return settings.endpoint.llm_judge(model, settings.prompt, on_call=settings.on_call)


def lexical_judge(settings: JudgeSettings) -> Judge:
    """The lexical judge over `settings.docs`, with the settings file `settings.config` (else
    ./relgrade-lexical.toml if present, else the shipped one)."""
    from grader.judges.lexical.config import load_lexical_config
    from grader.judges.lexical.judge import LexicalJudge

    return LexicalJudge(settings.docs, load_lexical_config(settings.config))


register_judge(
    "llm",
    llm_judge,
    help="an LLM on an OpenAI-compatible server (--model, --prompt)",
    takes_model=True,
    batch=True,
)
register_judge(
    "lexical",
    lexical_judge,
    help="offline BM25-style baseline (--judge-config: its TOML)",
    needs_all_docs=True,
)
