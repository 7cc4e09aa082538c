"""The flags of every command that sends requests to an LLM server; what they resolve to is
`grader.job.endpoint.Settings`."""

from __future__ import annotations

import argparse

from grader import defaults
from grader.cli.server_flags import add_server_flags

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
