"""`--allow-changed-prompt` and the check it relaxes, shared by `grade` and `regrade`: a prompt's
name@version must mean the text the store already graded with (`grader.store.prompt_versions`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from grader.job.judges import prompt_notes
from grader.prompts import PromptSpec
from grader.store.store import Store


def add_allow_changed_prompt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-changed-prompt",
        action="store_true",
        help="accept a prompt whose text changed but whose name@version the store already "
        "holds with another sha256 (refused by default: bump its version instead)",
    )


def check_prompts(store: Store, specs: Iterable[PromptSpec], *, allow_changed: bool) -> None:
    """`prompt_notes`, printed on stderr."""
    for note in prompt_notes(store, specs, allow_changed=allow_changed):
        print(note, file=sys.stderr)
