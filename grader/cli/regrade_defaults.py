"""What `regrade` takes from the selected judgments when a flag is not given: the prompt they
were graded with (`--prompt`) and their model(s) (`--model`), never a default model."""

from __future__ import annotations

import sys

from grader.cli.stderr import print_store_busy
from grader.errors import InputError, PromptError
from grader.models import PromptRef
from grader.prompts import PromptSpec, load_prompt
from grader.regrade.selection import Criterion
from grader.store.store import Store

OldVersions = tuple[list[PromptRef], list[str]]


def old_versions_in(store_path: str, criteria: list[Criterion]) -> OldVersions:
    """The prompts and judge ids of the selected judgments (one pass over the selection)."""
    from grader.regrade.selection import old_versions

    with Store(store_path, on_busy=print_store_busy) as store:
        return old_versions(store, criteria)


def stored_models(store_path: str, olds: OldVersions | None) -> list[str]:
    """The model(s) of the selected judgments, when they share them (an ensemble's members in
    order); else an InputError asking for --model."""
    from grader.regrade.selection import judge_models

    judges = olds[1] if olds else []
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


def stored_prompt(store_path: str, olds: OldVersions | None) -> PromptSpec:
    """The prompt of the selected judgments, when they share one and its file is at hand (a
    shipped prompt of that name@version and sha256); else an InputError asking for --prompt."""
    found = olds[0] if olds else []
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
