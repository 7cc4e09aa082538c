"""`--judge` and `--judge-config`, shared by the commands that grade (`grade`, `regrade`,
`batch export`), and the judges built from them through the registry
(`grader.judges.registry`): the choices are the registered judges, never a list written here."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from grader.errors import InputError
from grader.judges import registry
from grader.judges.base import Judge
from grader.judges.registry import JudgeSettings, judge_kind, judge_kinds, judge_names

if TYPE_CHECKING:
    from grader.judges.llm.judge import LLMJudge

DEFAULT_JUDGE = "llm"


def add_judge_options(p: argparse.ArgumentParser, *, batch: bool = False) -> None:
    """--judge NAME (the registered judges; `batch`: those the Batch API can send) and
    --judge-config FILE (--lexical-config, its older name)."""
    kinds = judge_kinds(batch=batch)
    listed = "; ".join(f"{k.name}: {k.help}" for k in kinds)
    p.add_argument(
        "--judge",
        choices=[k.name for k in kinds],
        default=DEFAULT_JUDGE,
        help=f"which judge grades ({listed}; default {DEFAULT_JUDGE})",
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


def check_judge_args(args: argparse.Namespace) -> None:
    """Fail before reading any file when the flags ask a judge for what it does not take."""
    kind = judge_kind(args.judge)
    models = _models(args)
    if models and not kind.takes_model:
        raise InputError(
            f"--model is for LLM judges: judge {kind.name!r} takes no model",
            hint=f"drop --model or --judge {kind.name}",
        )


def check_regrade_judge(args: argparse.Namespace, default_prompt: str) -> None:
    """`check_judge_args`, and what regrading asks more: the Batch API sends LLM requests only,
    and the stored pairs are all the documents there are (no --docs to read a collection). A
    judge that takes no model reads no prompt: it gets `default_prompt` when --prompt is not
    given (the prompt of the stored judgments may not load)."""
    check_judge_args(args)
    kind = judge_kind(args.judge)
    if not kind.takes_model and not args.prompt:
        args.prompt = default_prompt
    if getattr(args, "batch", False) and not kind.batch:
        raise InputError(
            f"--batch sends LLM requests: judge {kind.name!r} makes none",
            hint=f"drop --batch, or use --judge {' or '.join(judge_names(batch=True))}",
        )
    if kind.needs_all_docs:
        raise InputError(
            f"judge {kind.name!r} reads every document of the collection, which regrade has not",
            hint=f"grade again: relgrade grade --judge {kind.name} --docs D ...",
        )


def _models(args: argparse.Namespace) -> list[str]:
    given = getattr(args, "model", None)
    if given is None:
        return []
    return [given] if isinstance(given, str) else list(given)


def build_judges(
    args: argparse.Namespace, base: JudgeSettings, models: Sequence[str] | None = None
) -> list[Judge]:
    """The judges `--judge` asks for (`grader.judges.registry.build_judges`). `base` holds what
    the command has; --judge-config and every flag are added here; `models` defaults to the
    --model values."""
    settings = dataclasses.replace(base, config=args.judge_config, options=vars(args))
    wanted = list(models) if models is not None else _models(args)
    return registry.build_judges(args.judge, settings, wanted)


def llm_judges(
    args: argparse.Namespace, base: JudgeSettings, models: Sequence[str]
) -> list[LLMJudge]:
    """The LLM judges --judge asks for (one per model), for an estimate of what they would
    send; an InputError for a judge that sends nothing."""
    from grader.judges.llm.judge import LLMJudge

    judges = [j for j in build_judges(args, base, models) if isinstance(j, LLMJudge)]
    if not judges:
        raise InputError(
            f"--dry-run estimates LLM requests; judge {args.judge!r} sends none",
            hint="drop --dry-run: an offline judge costs nothing",
        )
    return judges
