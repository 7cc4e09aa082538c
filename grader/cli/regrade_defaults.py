"""What `regrade` takes from the selected judgments when a flag is not given: the prompt they
were graded with (`--prompt`) and their model(s) (`--model`), never a default model."""

from __future__ import annotations

import sys
from typing import Any

from grader.cli.stderr import print_store_busy, say
from grader.errors import InputError, PromptError
from grader.job.judges import prompt_notes
from grader.judges.registry import judge_kind
from grader.models import PromptRef
from grader.prompts import PromptSpec, load_prompt
from grader.regrade.selection import Criterion
from grader.store.store import Store


def settle_prompt_and_models(args: Any, criteria: list[Criterion]) -> PromptSpec:
    """The new prompt: --prompt (checked against the store's record of it), else the prompt of
    the selected judgments; --model, when not given, becomes the selection's models."""
    from grader.regrade.selection import old_versions

    takes_model = judge_kind(args.judge).takes_model
    with Store(args.store, on_busy=print_store_busy) as store:
        if args.prompt and (args.model or not takes_model):
            spec = load_prompt(args.prompt)
        else:
            prompts, judges = old_versions(store, criteria)
            spec = load_prompt(args.prompt) if args.prompt else stored_prompt(args.store, prompts)
            if not args.model and takes_model:  # the selection's model, never a default one
                args.model = stored_models(args.store, judges)
        if args.prompt:  # a prompt from the store is the text it was graded with
            for note in prompt_notes(store, [spec], allow_changed=args.allow_changed_prompt):
                say(note)
    args.prompt = args.prompt or spec.source  # what batch jobs record to rebuild the judge
    return spec


def stored_models(store_path: str, judges: list[str]) -> list[str]:
    """The model(s) of the selected judgments, when they share them (an ensemble's members in
    order); else an InputError asking for --model."""
    from grader.regrade.selection import judge_models

    models = {judge: judge_models(judge) for judge in judges}
    if not judges:
        raise InputError(
            "no model to default to: nothing is selected",
            path=store_path,
            hint="give --model M",
        )
    if len(judges) > 1 or models[judges[0]] is None:
        what = f"judges {', '.join(judges)}" if len(judges) > 1 else f"judge {judges[0]}"
        raise InputError(
            f"the selected judgments were graded by {what}: no one model to default to",
            path=store_path,
            hint="give --model M (several make an ensemble), or narrow the selection",
        )
    found = models[judges[0]] or []
    print(
        f"model {', '.join(found)} (from the selected judgments; --model to change it)",
        file=sys.stderr,
    )
    return found


def stored_prompt(store_path: str, found: list[PromptRef]) -> PromptSpec:
    """The prompt of the selected judgments, when they share one and its file is at hand (a
    shipped prompt of that name@version and sha256); else an InputError asking for --prompt."""
    if not found:
        raise InputError(
            "no prompt to default to: the selected judgments record none (or nothing is selected)",
            path=store_path,
            hint="give --prompt NAME or FILE",
        )
    if len(found) > 1:
        listed = ", ".join(f"{p} (sha256 {p.sha256[:12]})" for p in found)
        raise InputError(
            f"the selected judgments were graded with {len(found)} prompts: {listed}",
            path=store_path,
            hint="give --prompt NAME or FILE, or narrow the selection with --select prompt=OLD",
        )
    ref = found[0]
    try:
        spec = load_prompt(f"{ref.name}@{ref.version}")
    except PromptError:
        spec = None
    if spec is None or spec.sha256 != ref.sha256:
        where = "is not a shipped prompt" if spec is None else f"differs from {spec.source}"
        raise InputError(
            f"the selected judgments were graded with prompt {ref} (sha256 {ref.sha256[:12]}), "
            f"which {where}",
            path=store_path,
            hint="give --prompt FILE with that prompt's file",
        )
    print(f"prompt {ref} (from the selected judgments; --prompt to change it)", file=sys.stderr)
    return spec
