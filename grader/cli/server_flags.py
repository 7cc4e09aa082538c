"""Flags about the server a run talks to, shared by `grade`, `regrade` and `batch`: which output
mode to start in, the context the server has (when its `/v1/models` does not say), and whether
`grade` asks for logprobs."""

from __future__ import annotations

import argparse
import sys

from grader.judges.llm.types import ModeSwitch
from grader.prompts import OUTPUT_MODES, PromptSpec, load_prompt

OUTPUT_MODE_HELP = (
    "the output mode to start in (json_schema): a server that refuses it moves the run, once, "
    "along json_schema -> json_object_schema (llama.cpp) -> json_object -> text; "
    "vllm_structured_outputs, vllm_guided_json and ollama_format send vLLM's or Ollama's own "
    "request fields (see docs/servers.md)"
)


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """--output-mode MODE and --max-context TOKENS."""
    p.add_argument(
        "--output-mode", choices=OUTPUT_MODES, default="json_schema", help=OUTPUT_MODE_HELP
    )
    p.add_argument(
        "--max-context",
        type=int,
        metavar="TOKENS",
        help="the server's context in tokens (default: what its /v1/models says, if anything); "
        "documents are cut to fit it, with the truncation flag",
    )


NO_LOGPROBS_HELP = (
    "ask for no logprobs, whatever the prompt file says: the judgments then carry no grade "
    "distribution (what `sample --strategy uncertainty` and `active` draw by), and each "
    "judgment is cheaper (2.4x faster on llama-cpp-python's server; docs/servers.md)"
)


def add_logprobs_flag(p: argparse.ArgumentParser) -> None:
    """--no-logprobs."""
    p.add_argument("--no-logprobs", action="store_true", help=NO_LOGPROBS_HELP)


def run_prompt(args: argparse.Namespace, name: str) -> PromptSpec:
    """The prompt `name` as this run asks it: without logprobs under --no-logprobs."""
    spec = load_prompt(name)
    return spec.without_logprobs() if getattr(args, "no_logprobs", False) else spec


def switch_text(switch: ModeSwitch) -> str:
    """What to say, once, when the run moved to another output mode or parameter, and why."""
    said = " ".join(switch.reason.split())
    if len(said) > 240:
        said = said[:237] + "..."
    return (
        f"output mode {switch.from_mode} -> {switch.to_mode}: this run now uses "
        f"{switch.to_mode} (each call's mode is in the store's call log), because: {said}"
    )


def print_switch(switch: ModeSwitch) -> None:
    """Tell, once, that the run moved to another output mode or parameter, and why."""
    print(switch_text(switch), file=sys.stderr)


def print_notice(text: str) -> None:
    """A warning about the server (a model it does not list)."""
    print(f"warning: {text}", file=sys.stderr)
