"""Every option of the grade job, with its type and default, in one place. The command maps its
flags onto `GradeOptions` and the Python API its keywords (`options_from`), by the same names."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grader import defaults


@dataclass
class GradeOptions:
    """grade's options (named as its flags, `--no-logprobs` as `logprobs`)."""

    run: list[Any] = field(default_factory=list)
    queries: Any = None
    docs: Any = None
    dataset: str | None = None
    depth: int = defaults.DEPTH
    skip_judged: list[Any] = field(default_factory=list)
    skip_missing: bool = False
    prompt: str = defaults.PROMPT
    allow_changed_prompt: bool = False
    model: list[str] = field(default_factory=list)
    judge: str = defaults.JUDGE
    judge_config: str | None = None
    base_url: str | list[str] | None = None
    api_key_env: str | None = None
    output_mode: str = defaults.OUTPUT_MODE
    max_context: int | None = None
    logprobs: bool = True
    concurrency: int = defaults.CONCURRENCY
    rpm: float | None = None
    tpm: float | None = None
    timeout: float = defaults.TIMEOUT_S
    max_attempts: int = defaults.MAX_ATTEMPTS
    prices: str | None = None
    quiet: bool = False
    store: str = defaults.STORE
    out: str | None = None
    qrels_out: str | None = None
    dry_run: bool = False
    verbose: bool = False
    max_cost: float | None = None
    verify_low: bool = False
    verify_prompt: str | None = None
    verify_model: str | None = None
    merged_out: str | None = None
    llm_scale: str | None = None
    also_judged: int | None = None
    seed: int = 0
    stratify: bool = False


OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(GradeOptions))


def options_from(given: Mapping[str, Any]) -> GradeOptions:
    """The options named in `given` (the command's flags or the API's keywords), the others at
    their defaults; a name that is no option is a TypeError naming it."""
    unknown = sorted(set(given) - OPTION_NAMES)
    if unknown:
        raise TypeError(f"grade has no option {unknown[0]!r}")
    return GradeOptions(**given)
