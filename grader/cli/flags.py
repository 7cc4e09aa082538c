"""The sub-commands (`COMMANDS`, `add_command`) and the flags that several share, defined once so
each means one thing everywhere; a flag that keeps one value is an error when given twice
(`StoreOnce`). The LLM server flags resolve to `grader.job.endpoint.Settings`."""

from __future__ import annotations

import argparse
import weakref
from collections.abc import Sequence
from typing import Any

from grader import defaults

COMMANDS: dict[str, str] = {
    "evaluate": "score runs against qrels (nDCG, RR, P, R, AP, ...), identical to trec_eval",
    "grade": "grade run results 0-3 with an LLM or the lexical baseline",
    "prompts": "list, show or render prompt files",
    "calibrate": "agreement of LLM grades with human grades, bias, system ranking, estimates",
    "sample": "draw a blind spot-check sample for people to grade, or import their grades",
    "annotate": "grade a blind sample in a local web page (keys 0-3), or export the grades",
    "regrade": "regrade stored judgments with a new prompt or model; diff old vs new",
    "batch": "Batch API jobs (status, collect); batch files for any engine (export, import, close)",
}


def add_command(sub: Any, name: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of command (or action) `name`, its help from COMMANDS unless given; an epilog
    or a description of several lines is printed as written."""
    kwargs.setdefault("help", COMMANDS.get(name))
    if kwargs.get("epilog") or "\n" in description:
        kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
    parser: argparse.ArgumentParser = sub.add_parser(name, description=description, **kwargs)
    return parser


class StoreOnce(argparse._StoreAction):
    """argparse's `store`, but a second occurrence of the flag in one command line is an
    error naming it (exit 2), instead of silently replacing the first value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the namespaces (by id: a Namespace is not hashable) this flag was given in, each
        # forgotten with its namespace
        self._seen: weakref.WeakValueDictionary[int, argparse.Namespace] = (
            weakref.WeakValueDictionary()
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if self.option_strings and self._seen.get(id(namespace)) is namespace:
            raise argparse.ArgumentError(
                self,
                f"given more than once; it takes one value (was {getattr(namespace, self.dest)!r}"
                f", then {values!r}): give it once",
            )
        self._seen[id(namespace)] = namespace
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """The parser of `relgrade` and of each command: an option with no action, or `store`, keeps
    one value and refuses a second (`StoreOnce`); repeatable ones say so (`append`, `extend`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)


def add_store(p: argparse.ArgumentParser, what: str = "judgment store, SQLite") -> None:
    """--store DB, default relgrade.db: where every command keeps judgments, texts, batch jobs."""
    store = defaults.STORE
    p.add_argument("--store", default=store, metavar="DB", help=f"{what} (default {store})")


def add_runs(
    p: argparse.ArgumentParser, what: str = "TREC run(s)", *, required: bool = False
) -> None:
    """--run RUN [RUN ...], repeatable: every value is kept, in order."""
    p.add_argument(
        "--run",
        action="extend",
        nargs="+",
        required=required,
        default=None if required else [],
        metavar="RUN",
        help=f"{what}; several: --run A B or --run A --run B",
    )


def add_pair_inputs(p: argparse.ArgumentParser, done: str, *, dataset: bool = False) -> None:
    """The pairs: the runs' top --depth (`done` to them), less --skip-judged, with the texts;
    with `dataset` (grade's), --dataset too and --run required."""
    p.add_argument("--queries", metavar="Q", help="queries (TSV or JSONL)")
    p.add_argument("--docs", metavar="D", help="documents (JSONL or TSV)")
    if dataset:
        p.add_argument(
            "--dataset",
            metavar="ID",
            help="an ir_datasets id: its queries and documents, where --queries/--docs are not "
            "given (needs relgrade[ir-datasets])",
        )
    add_runs(p, f"TREC run(s) whose top --depth results are {done}", required=dataset)
    p.add_argument(
        "--depth",
        type=int,
        default=defaults.DEPTH,
        metavar="K",
        help=f"top K per query ({defaults.DEPTH})",
    )
    p.add_argument(
        "--skip-judged",
        action="append",
        default=[],
        metavar="QRELS",
        help="leave out pairs these qrels already grade",
    )
    p.add_argument(
        "--skip-missing",
        action="store_true",
        help="skip pairs whose query or doc id is not in --queries/--docs (else an error)",
    )


def add_select(
    p: argparse.ArgumentParser, what: str = "", default: list[str] | None = None
) -> None:
    """--select CRITERION ... (regrade's, and batch export's): which stored pairs."""
    criteria = "all | failed | grade<=N | sample FILE | disagreement | prompt=OLD"
    p.add_argument(
        "--select", nargs="+", default=default, metavar="CRITERION", help=what + criteria
    )


def add_measures(p: argparse.ArgumentParser, what: str) -> None:
    """-m/--measure MEASURE [MEASURE ...], repeatable: every value is kept, in order (dest
    `measures`; an empty list when not given)."""
    p.add_argument(
        "-m",
        "--measure",
        dest="measures",
        action="extend",
        nargs="+",
        default=[],
        metavar="MEASURE",
        help=f"{what}; several: -m A B or -m A -m B",
    )


def add_judge_options(p: argparse.ArgumentParser, *, batch: bool = False) -> None:
    """--judge NAME (the registered judges; `batch`: those the Batch API can send) and
    --judge-config FILE (--lexical-config, its older name)."""
    from grader.judges.registry import judge_kinds  # pydantic: not for `evaluate`'s flags

    kinds = judge_kinds(batch=batch)
    listed = "; ".join(f"{k.name}: {k.help}" for k in kinds)
    p.add_argument(
        "--judge",
        choices=[k.name for k in kinds],
        default=defaults.JUDGE,
        help=f"which judge grades ({listed}; default {defaults.JUDGE})",
    )
    p.add_argument(
        "--judge-config",
        "--lexical-config",
        dest="judge_config",
        metavar="FILE",
        help="the judge's own settings file (lexical: its TOML; default ./relgrade-lexical.toml "
        "as written by calibrate --fit-lexical, if present, else the shipped "
        "prompts/lexical-v1.toml)",
    )


def add_allow_changed_prompt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-changed-prompt",
        action="store_true",
        help="accept a prompt whose text changed but whose name@version the store already "
        "holds with another sha256 (refused by default: bump its version instead)",
    )


def add_api_key_env(p: argparse.ArgumentParser) -> None:
    """The --api-key-env flag, with the help text saying which key goes where."""
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="send the key held in environment variable NAME, to any server (a local one "
        "included); without this flag $OPENAI_API_KEY goes to OpenAI and any other server not on "
        "this machine, and a loopback one (localhost, 127.0.0.0/8, ::1) gets no key (only a "
        "placeholder)",
    )


def add_llm_options(p: argparse.ArgumentParser, *, several_servers: bool = False) -> None:
    """The flags of every command that sends requests to an LLM server, one help and default each;
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


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """--output-mode MODE and --max-context TOKENS."""
    from grader.prompts import OUTPUT_MODES  # pydantic: not for `evaluate`'s flags

    p.add_argument(
        "--output-mode",
        choices=OUTPUT_MODES,
        default=defaults.OUTPUT_MODE,
        help="the output mode to start in (json_schema): a server that refuses it moves the run, "
        "once, along json_schema -> json_object_schema (llama.cpp) -> json_object -> text; "
        "vllm_structured_outputs, vllm_guided_json and ollama_format send vLLM's or Ollama's own "
        "request fields (see docs/servers.md)",
    )
    p.add_argument(
        "--max-context",
        type=int,
        metavar="TOKENS",
        help="the server's context in tokens (default: what its /v1/models says, if anything); "
        "documents are cut to fit it, with the truncation flag",
    )
