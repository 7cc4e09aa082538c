"""`--allow-changed-prompt` and the check it relaxes, shared by `grade` and `regrade`: a prompt's
name@version must mean the text the store already graded with (`grader.store.prompt_versions`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from grader.prompts import PromptSpec
from grader.store.prompt_versions import check_prompt_version
from grader.store.store import Store


def add_allow_changed_prompt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-changed-prompt",
        action="store_true",
        help="accept a prompt whose text changed but whose name@version the store already "
        "holds with another sha256 (refused by default: bump its version instead)",
    )


def check_prompts(store: Store, specs: Iterable[PromptSpec], *, allow_changed: bool) -> None:
    """Check each distinct prompt against the store (PromptError when one changed under the
    same name@version and that is not allowed); print the notes on stderr."""
    seen: set[str] = set()
    for spec in specs:
        if spec.sha256 in seen:
            continue
        seen.add(spec.sha256)
        note = check_prompt_version(store, spec, allow_changed=allow_changed)
        if note:
            print(note, file=sys.stderr)
