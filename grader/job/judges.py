"""The judges a grade run asks for, built through the registry (`grader.judges.registry`) from
the run's options and its one `Settings`: checks, the members, the verifier and their prompts."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from grader.errors import InputError, PromptError
from grader.job.endpoint import Settings
from grader.judges import registry
from grader.judges.base import Judge
from grader.judges.registry import JudgeSettings, build_judge, judge_kind, judge_names
from grader.prompts import PromptSpec, load_prompt
from grader.spelling import option
from grader.store.store import Store
from grader.store.writer import StoreWriter

if TYPE_CHECKING:
    from grader.grading.report import GradingReport
    from grader.judges.llm.judge import LLMJudge


def check_judge_args(args: Any) -> None:
    """Fail before reading any file when the flags ask a judge for what it does not take."""
    kind = judge_kind(args.judge)
    models = _models(args)
    if models and not kind.takes_model:
        raise InputError(
            f"--model is for LLM judges: judge {kind.name!r} takes no model",
            hint=f"drop --model or --judge {kind.name}",
        )


def check_regrade_judge(args: Any, default_prompt: str) -> None:
    """`check_judge_args`, and for regrading: the Batch API sends LLM requests only, no --docs
    (the stored pairs are all the documents), and a judge taking no model gets `default_prompt`
    when --prompt is not given (the stored judgments' prompt may not load)."""
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


def _models(args: Any) -> list[str]:
    given = getattr(args, "model", None)
    if given is None:
        return []
    return [given] if isinstance(given, str) else list(given)


def build_judges(
    args: Any, base: JudgeSettings, models: Sequence[str] | None = None
) -> list[Judge]:
    """The judges `--judge` asks for (`grader.judges.registry.build_judges`). `base` holds what
    the command has; --judge-config and every flag are added here; `models` defaults to the
    --model values."""
    settings = dataclasses.replace(base, config=args.judge_config, options=vars(args))
    wanted = list(models) if models is not None else _models(args)
    return registry.build_judges(args.judge, settings, wanted)


def llm_judges(args: Any, base: JudgeSettings, models: Sequence[str]) -> list[LLMJudge]:
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


def run_prompt(options: Any, name: str) -> PromptSpec:
    """The prompt `name` as this run asks it: without logprobs when `logprobs` is off."""
    spec = load_prompt(name)
    return spec if getattr(options, "logprobs", True) else spec.without_logprobs()


class GradeJudges:
    """The judges of one run, built from its options and the one `Settings`."""

    def __init__(
        self,
        options: Any,
        docs: dict[str, Any],
        writer: StoreWriter,
        say: Callable[[str], None],
        notice: Callable[[str], None] | None = None,
    ):
        self.options = options
        self.settings = Settings.from_args(options)
        self.settings.notice = notice
        self.writer = writer
        self.verifier: Judge | None = None
        # Every judge an LLM: a missing key only matters once a request is to be sent.
        llm = judge_kind(options.judge).takes_model
        self.missing_key = self.settings.defer_missing_key() if llm else None
        base = JudgeSettings(
            prompt=run_prompt(options, options.prompt),
            docs=docs,
            endpoint=self.settings,
            on_call=writer.log_call,
        )
        self.members = build_judges(options, base)
        self.secrets = self.settings.secrets if llm else []
        if options.judge == "lexical":
            from grader.judges.lexical.judge import JUDGE_ID, LexicalJudge

            for judge in self.members:  # which settings it reads, and the judge id it stamps
                if isinstance(judge, LexicalJudge):
                    which = "the" if judge.judge_id == JUDGE_ID else "not the"
                    say(
                        f"lexical judge settings: {judge.config.path} ({which} shipped default;"
                        f" judgments say judge {judge.judge_id})"
                    )
        if options.verify_low:  # the registry's `llm` judge of the verify model and prompt
            verify = JudgeSettings(
                model=self.settings.model(options.verify_model or (options.model or [None])[0]),
                prompt=run_prompt(options, options.verify_prompt or options.prompt),
                endpoint=self.settings,
                on_call=writer.log_call,
            )
            verifier = self.verifier = build_judge("llm", verify)
            self.secrets = self.settings.secrets
            if any(verifier.fingerprint() == m.fingerprint() for m in self.members):
                raise InputError(
                    "--verify-low would ask the same judge twice",
                    hint="give --verify-prompt or --verify-model different from the first judge",
                )

    @property
    def every(self) -> list[Judge]:
        """The members, then the verifier if any."""
        return [*self.members, *([self.verifier] if self.verifier else [])]

    async def aclose(self) -> None:
        """Close every judge's HTTP client, on this run's event loop: a client left to the
        garbage collector would close on another loop (the next call's), where it fails."""
        for judge in self.every:
            close = getattr(judge, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    def report_servers(self, report: GradingReport) -> None:
        """Tell `report` what the LLM judges saw of their servers: replies per server (when one
        spread its requests over several), whether all are this machine (loopback), and
        whether any reply said its cached prompt tokens (None when no judge sends requests)."""
        judges = self._llm()
        spread = [judge.answers_by_server() for judge in judges]
        counts: Counter[str] = Counter()
        for mine in spread:
            counts.update(mine)
        report.answers_by_server = dict(counts) if any(len(m) > 1 for m in spread) else {}
        report.local = bool(judges) and all(judge.local() for judge in judges)
        report.cached_reported = any(j.cached_reported() for j in judges) if judges else None

    def check_key(self) -> None:
        """Raise the missing key's error: called when some pair is not stored (nothing sent)."""
        if self.missing_key is not None:
            raise self.missing_key

    def _llm(self) -> list[LLMJudge]:
        """The LLM judges. One exists only once its module is loaded: a lexical run does not
        import it (nor the openai SDK, ~1 s)."""
        llm = sys.modules.get("grader.judges.llm.judge")
        return [] if llm is None else [j for j in self.every if isinstance(j, llm.LLMJudge)]

    def prompts(self) -> list[PromptSpec]:
        """The prompt files of the LLM judges."""
        return [judge.prompt for judge in self._llm()]


def prompt_notes(store: Store, specs: Iterable[PromptSpec], *, allow_changed: bool) -> list[str]:
    """Check each distinct prompt against the versions the store holds (`_prompt_note`); the
    notes to say."""
    found = {spec.sha256: spec for spec in specs}.values()
    notes = [_prompt_note(store, s, allow_changed=allow_changed) for s in found]
    return [note for note in notes if note]


_NOT_REQUEST = ("name", "version", "sha256", "source", "description")
"""PromptSpec fields that do not change what is sent (the rest makes the request)."""


def _request_fields(spec: PromptSpec) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(spec).items() if k not in _NOT_REQUEST}


def _same_request_as(spec: PromptSpec, version: str, shas: set[str]) -> bool:
    """Whether a loadable prompt `spec.name@version` with one of `shas` asks what `spec` asks."""
    try:
        other = load_prompt(f"{spec.name}@{version}")
    except PromptError:
        return False  # not a shipped prompt: its text is not at hand to compare
    return other.sha256 in shas and _request_fields(other) == _request_fields(spec)


def _prompt_note(store: Store, spec: PromptSpec, *, allow_changed: bool) -> str | None:
    """A prompt's `name@version` means one text: refuse `spec` (PromptError) when the store holds
    its name@version with another sha256, unless `allow_changed`; else a note when it is allowed
    or only bumps a version (identical requests)."""
    versions = store.prompt_versions(spec.name)
    stored = versions.get(spec.version, set())
    allow = option("--allow-changed-prompt", "allow_changed_prompt=True")
    if stored and spec.sha256 not in stored:
        olds = ", ".join(sorted(s[:12] for s in stored))
        detail = (
            f"{spec.source} has sha256 {spec.sha256[:12]}, the judgments of {spec.id} in "
            f"{store.path} have {olds}"
        )
        if not allow_changed:
            raise PromptError(
                f"prompt {spec.id} changed since it was used: bump its version ({detail}; set "
                f"version in the file to a new value, or pass {allow} to store both texts under "
                "one name@version)"
            )
        return f"prompt {spec.id} changed since it was used ({detail}); kept by {allow}"
    if stored:
        return None
    for version, shas in sorted(versions.items()):
        if _same_request_as(spec, version, shas):
            return (
                f"prompt {spec.id} asks exactly what {spec.name}@{version} (in the store) asked: "
                "only its version changed, so nothing changed in what is sent; its grades will be "
                "requested (and paid) again under the new version"
            )
    return None
