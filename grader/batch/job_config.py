"""The judge configuration a batch job or export is stored with (model, prompt file and sha256,
output mode, fingerprint), and the judge rebuilt from it in another process, refused when it no
longer matches."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.errors import InputError
from grader.judges.llm.judge import LLMJudge
from grader.prompts import OUTPUT_MODES, PromptSpec, load_prompt

MakeJudge = Callable[[str, PromptSpec], LLMJudge]  # (model, prompt) -> the live judge


def job_config(
    judge: LLMBatchJudge, prompt_arg: str, select: Sequence[str] | None = None
) -> dict[str, Any]:
    """What a job records to rebuild its judge in another process, and the regrade's
    --select (`batch collect` writes what that regrade would)."""
    spec = judge.live.prompt
    config = {
        "judge_id": judge.judge_id,
        "model": judge.live.model,
        "prompt": prompt_arg,
        "prompt_path": str(Path(spec.source).resolve()),
        "prompt_id": spec.id,
        "prompt_sha": spec.sha256,
        "mode": judge.mode,
        "fingerprint": judge.fingerprint(),
    }
    if select is not None:
        config["select"] = list(select)
    return config


class JobJudges:
    """The judges of stored jobs, rebuilt once per configuration by `make_judge`."""

    def __init__(self, make_judge: MakeJudge) -> None:
        self.make_judge = make_judge
        self._jobs: dict[str, LLMBatchJudge] = {}

    def remember(self, config: dict[str, Any], judge: LLMBatchJudge) -> None:
        """Use `judge` for jobs stored with `config`."""
        self._jobs[json.dumps(config, sort_keys=True)] = judge

    def for_job(self, config: dict[str, Any]) -> LLMBatchJudge:
        """The judge a stored job was submitted with, checked against its fingerprint."""
        cache_key = json.dumps(config, sort_keys=True)
        if cache_key in self._jobs:
            return self._jobs[cache_key]
        path = config.get("prompt_path")
        source = path if path and Path(path).is_file() else config.get("prompt")
        if not source or "model" not in config:
            raise InputError("a batch job in the store has no judge settings; regrade again")
        spec = load_prompt(str(source))
        if spec.sha256 != config.get("prompt_sha"):
            raise InputError(
                f"the batch job was sent with prompt {config.get('prompt_id')} "
                f"(sha256 {config.get('prompt_sha')}), but {source} now has sha256 {spec.sha256}",
                hint="restore that prompt file to collect the batch",
            )
        mode = config.get("mode")
        judge = LLMBatchJudge(
            self.make_judge(str(config["model"]), spec),
            mode=mode if mode in OUTPUT_MODES else None,
        )
        if judge.fingerprint() != config.get("fingerprint"):
            raise InputError(
                "the judge rebuilt for a stored batch job does not match the one that sent it",
                hint="use the relgrade version that submitted the batch",
            )
        self._jobs[cache_key] = judge
        return judge
