"""Flags about the server a run talks to, shared by `grade`, `regrade` and `batch`: which output
mode to start in, the context the server has (when its `/v1/models` does not say), and whether
`grade` asks for logprobs."""

from __future__ import annotations

import argparse

from grader import defaults
from grader.prompts import OUTPUT_MODES

OUTPUT_MODE_HELP = (
    "the output mode to start in (json_schema): a server that refuses it moves the run, once, "
    "along json_schema -> json_object_schema (llama.cpp) -> json_object -> text; "
    "vllm_structured_outputs, vllm_guided_json and ollama_format send vLLM's or Ollama's own "
    "request fields (see docs/servers.md)"
)


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """--output-mode MODE and --max-context TOKENS."""
    p.add_argument(
        "--output-mode", choices=OUTPUT_MODES, default=defaults.OUTPUT_MODE, help=OUTPUT_MODE_HELP
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
    """--no-logprobs (option `logprobs`)."""
    p.add_argument("--no-logprobs", dest="logprobs", action="store_false", help=NO_LOGPROBS_HELP)
