"""The flags of every command that sends requests to an LLM server (`grade`, `regrade`, `batch`);
what they resolve to is `grader.job.endpoint.Settings`."""

from __future__ import annotations

import argparse

from grader import defaults
from grader.prompts import OUTPUT_MODES

API_KEY_ENV_HELP = (
    "send the key held in environment variable NAME, to any server (a local one included); "
    "without this flag $OPENAI_API_KEY goes to OpenAI and any other server not on this machine, "
    "and a loopback one (localhost, 127.0.0.0/8, ::1) gets no key (only a placeholder)"
)


def add_api_key_env(p: argparse.ArgumentParser) -> None:
    """The --api-key-env flag, with the help text saying which key goes where."""
    p.add_argument("--api-key-env", metavar="NAME", help=API_KEY_ENV_HELP)


def add_llm_options(p: argparse.ArgumentParser, *, several_servers: bool = False) -> None:
    """The flags of every command that sends requests to an LLM server (`grade`, `regrade`,
    `batch collect`, `batch import`), with one help text and one default each;
    `several_servers`: --base-url may be repeated (a list; else one URL)."""
    if several_servers:
        p.add_argument(
            "--base-url",
            action="append",
            metavar="URL",
            help="OpenAI-compatible endpoint; repeat it to spread the requests over several "
            "servers with the same model (the one with the fewest in flight first)",
        )
    else:
        p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint")
    add_api_key_env(p)
    add_server_flags(p)
    p.add_argument(
        "--concurrency",
        type=int,
        default=defaults.CONCURRENCY,
        metavar="N",
        help=f"requests at once ({defaults.CONCURRENCY})",
    )
    p.add_argument("--rpm", type=float, help="requests per minute limit (live requests)")
    p.add_argument("--tpm", type=float, help="tokens per minute limit (live requests)")
    p.add_argument(
        "--timeout",
        type=float,
        default=defaults.TIMEOUT_S,
        help=f"seconds per whole request, retries apart ({defaults.TIMEOUT_S:g})",
    )
    p.add_argument(
        "--max-attempts",
        type=int,
        default=defaults.MAX_ATTEMPTS,
        help=f"attempts per pair ({defaults.MAX_ATTEMPTS})",
    )
    p.add_argument("--prices", metavar="TOML", help="price table (USD per 1M tokens)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


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
