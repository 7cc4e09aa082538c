"""What `relgrade grade` and `relgrade.grade` share: checking grade's flags, selecting the pairs,
building the judges and grading the pairs with the store, so the command and the Python API
grade alike (the API fills grade's flags, at their defaults, from its keywords)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grader.cli.judge_options import build_judges, check_judge_args
from grader.cli.output_files import read_back_unsaved, saving_unsaved
from grader.cli.prompt_check import check_prompts
from grader.cli.server_flags import run_prompt
from grader.cli.settings import Settings
from grader.cli.store_busy import print_store_busy
from grader.errors import InputError
from grader.grading.events import ProgressCallback
from grader.grading.pairs import Pair, PairSelection, pairs_to_grade
from grader.grading.pipeline import GradingReport, StoreWriter, grade_pairs
from grader.judges.base import Judge
from grader.judges.registry import JudgeSettings, build_judge, judge_kind
from grader.prompts import PromptSpec
from grader.spelling import option
from grader.store.store import Store


def say_on_stderr(line: str) -> None:
    """How the command says a note: a line on stderr."""
    print(line, file=sys.stderr)


def grade_flags(**given: Any) -> argparse.Namespace:
    """grade's flags at the command's defaults, with `given` set (the Python API's keywords)."""
    from grader.cli.grade import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["grade", "--run", ""])
    for name, value in given.items():
        if not hasattr(args, name):
            raise TypeError(f"grade has no option {name!r}")
        setattr(args, name, value)
    return args


def check_args(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise InputError(f"{option('--concurrency', 'concurrency')} must be at least 1")
    if args.max_attempts < 1:
        raise InputError(f"{option('--max-attempts', 'max_attempts')} must be at least 1")
    if args.max_cost is not None and args.max_cost < 0:
        raise InputError(f"{option('--max-cost', 'max_cost')} must not be negative")
    check_judge_args(args)
    if (args.verify_prompt or args.verify_model) and not args.verify_low:
        raise InputError("--verify-prompt/--verify-model need --verify-low")
    _check_folders(args)


def _check_folders(args: argparse.Namespace) -> None:
    """Fail before grading (and paying) when an output or the store could not be written, or
    would replace an input or another output."""
    _refuse_clashes(args)
    paths = [(option("--out", "out"), args.out)]
    paths.append((option("--qrels-out", "qrels_out"), args.qrels_out))
    paths.append((option("--merged-out", "merged_out"), args.merged_out))
    if not args.dry_run:  # a dry run never creates a store
        paths.append((option("--store", "store"), args.store))
    for flag, value in paths:
        if value is None:
            continue
        path = Path(value)
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(
                f"{flag}: the folder does not exist", path=path, hint="create it first"
            )
        if path.is_dir():
            raise InputError(f"{flag}: is a folder, not a file", path=path)


def _refuse_clashes(args: argparse.Namespace) -> None:
    from grader.cli import grade_holes
    from grader.cli.path_clash import refuse_clashes

    refuse_clashes(
        [
            ("--run", args.run),
            ("--skip-judged", args.skip_judged),
            ("--queries", args.queries),
            ("--docs", args.docs),
        ],
        [
            ("--out", args.out),
            ("--qrels-out", args.qrels_out),
            ("--merged-out", args.merged_out),
            ("--also-judged's manifest", list(grade_holes.manifest_paths(args))),
            ("--store", args.store),
        ],
    )


class GradeJudges:
    """The judges of one run, built from the flags and the one `Settings`."""

    def __init__(
        self,
        args: argparse.Namespace,
        docs: dict[str, Any],
        writer: StoreWriter,
        say: Callable[[str], None] = say_on_stderr,
        notice: Callable[[str], None] | None = None,
    ):
        self.args = args
        self.settings = Settings.from_args(args)
        self.settings.notice = notice
        self.secrets: list[str] = []
        self.writer = writer
        self.members: list[Judge] = []
        self.verifier: Judge | None = None
        # Every judge an LLM: a missing key only matters once a request is to be sent.
        llm = judge_kind(args.judge).takes_model
        self.missing_key = self.settings.defer_missing_key() if llm else None
        base = JudgeSettings(
            prompt=run_prompt(args, args.prompt),
            docs=docs,
            endpoint=self.settings,
            on_call=writer.log_call,
        )
        self.members = build_judges(args, base)
        self.secrets = self.settings.secrets if llm else []
        if args.judge == "lexical":
            from grader.judges.lexical.judge import LexicalJudge

            for judge in self.members:
                if isinstance(judge, LexicalJudge):
                    say(lexical_settings_note(judge.config.path, judge.judge_id))
        if args.verify_low:
            first_model = (args.model or [None])[0]
            model = self.settings.model(args.verify_model or first_model)
            prompt = args.verify_prompt or args.prompt
            verifier = self.llm(model, prompt)
            if any(verifier.fingerprint() == m.fingerprint() for m in self.members):
                raise InputError(
                    "--verify-low would ask the same judge twice",
                    hint="give --verify-prompt or --verify-model different from the first judge",
                )
            self.verifier = verifier

    def llm(self, model: str, prompt_name: str) -> Judge:
        """The verifier: the registry's `llm` judge, whatever --judge is."""
        settings = JudgeSettings(
            model=model,
            prompt=run_prompt(self.args, prompt_name),
            endpoint=self.settings,
            on_call=self.writer.log_call,
        )
        judge = build_judge("llm", settings)
        self.secrets = self.settings.secrets
        return judge

    async def aclose(self) -> None:
        """Close every judge's HTTP client, on this run's event loop: a client left to the
        garbage collector would close on another loop (the next call's), where it fails."""
        for judge in [*self.members, *([self.verifier] if self.verifier else [])]:
            close = getattr(judge, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    def answers_by_server(self) -> dict[str, int]:
        """Replies per server over every judge, when some judge spread its requests over
        several servers (else empty)."""
        counts: dict[str, int] = {}
        several = False
        for judge in [*self.members, *([self.verifier] if self.verifier else [])]:
            answers = getattr(judge, "answers_by_server", None)
            if answers is None:
                continue
            mine = answers()
            several = several or len(mine) > 1
            for url, n in mine.items():
                counts[url] = counts.get(url, 0) + n
        return counts if several else {}

    def local(self) -> bool:
        """Whether every judge that sends requests does so to this machine (loopback)."""
        said = [
            local()
            for judge in [*self.members, *([self.verifier] if self.verifier else [])]
            if (local := getattr(judge, "local", None)) is not None
        ]
        return bool(said) and all(said)

    def cached_reported(self) -> bool | None:
        """Whether any reply this run said its cached prompt tokens; None when no judge sends
        requests (nothing to report)."""
        said = [
            said()
            for judge in [*self.members, *([self.verifier] if self.verifier else [])]
            if (said := getattr(judge, "cached_reported", None)) is not None
        ]
        return any(said) if said else None

    def check_key(self) -> None:
        """Raise the missing key's error: called when some pair is not stored (nothing sent)."""
        if self.missing_key is not None:
            raise self.missing_key


def _prompts_of(judges: GradeJudges) -> list[PromptSpec]:
    """The prompt files of the LLM judges (members and verifier). An LLM judge exists only
    once its module is loaded: a lexical run does not import it (nor the openai SDK, ~1 s)."""
    llm = sys.modules.get("grader.judges.llm.judge")
    if llm is None:
        return []
    found = [*judges.members, *([judges.verifier] if judges.verifier else [])]
    return [j.prompt for j in found if isinstance(j, llm.LLMJudge)]


def lexical_settings_note(path: str | None, judge_id: str) -> str:
    """Which settings file the lexical judge reads, and the judge id it stamps."""
    from grader.judges.lexical.judge import JUDGE_ID

    which = "the shipped default" if judge_id == JUDGE_ID else "not the shipped default"
    return f"lexical judge settings: {path} ({which}; judgments say judge {judge_id})"


def _texts(args: argparse.Namespace) -> tuple[Any, Any]:
    """Where the queries and the documents come from: the files, else --dataset's."""
    queries, docs = args.queries, args.docs
    if (queries is None or docs is None) and args.dataset:
        from grader.io.datasets import load_dataset, require

        dataset = load_dataset(args.dataset)
        for part, given in (("queries", queries), ("docs", docs)):
            if given is None:
                require(dataset, args.dataset, part)
        queries = dataset if queries is None else queries
        docs = dataset if docs is None else docs
    if queries is None or docs is None:
        raise InputError(
            option("grade needs --queries and --docs", "grade needs queries= and docs="),
            hint=option("or --dataset ID (an ir_datasets id)", "or an ir_datasets dataset as both"),
        )
    return queries, docs


def select_pairs(
    args: argparse.Namespace, say: Callable[[str], None]
) -> tuple[PairSelection, dict[str, Any], Any]:
    """The pairs grade's flags select, the docs the lexical judge needs (all of them), and the
    plan of grading on top of people's labels (`grade_holes`; None without --skip-judged)."""
    from grader.cli import grade_holes
    from grader.io.texts import all_docs, docs_of, queries_of

    holes = grade_holes.plan(args)

    queries, docs = _texts(args)
    # The lexical judge's collection statistics need every document; an LLM judge needs only
    # those of the selected pairs, so a large docs file (or collection) is streamed and the
    # rest not kept.
    lexical = judge_kind(args.judge).needs_all_docs
    texts = all_docs(docs) if lexical else {}
    selection = pairs_to_grade(
        args.run,
        queries_of(queries),
        texts if lexical else docs_of(docs),
        depth=args.depth,
        skip_judged=[] if holes is not None else args.skip_judged,
        skip_missing=args.skip_missing,
        **grade_holes.selection_kwargs(holes),
    )
    if holes is not None:
        grade_holes.take_selection(holes, selection, args)
    if selection.missing and not args.quiet:
        say(f"skipped {selection.missing} pairs with unknown ids")
    return selection, texts, holes


async def grade_selection(
    args: argparse.Namespace,
    pairs: Sequence[Pair],
    docs: dict[str, Any],
    *,
    progress: ProgressCallback | None,
    say: Callable[[str], None],
    notice: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[GradingReport, bool]:
    """Grade `pairs` with the judges, store and limits of grade's flags `args`, as
    `relgrade grade` does (`relgrade.grade` too); `options` go to `grade_pairs` (Ctrl-C
    handling); the judges' notices about the server go to `notice` (None: stderr). Returns
    the report and whether a verifier took part."""
    check_args(args)
    store_path = Path(args.store)
    # A dry run never creates a store; it reads one if it exists.
    store = (
        None
        if args.dry_run and not store_path.exists()
        else Store(store_path, on_busy=print_store_busy)
    )
    judges: GradeJudges | None = None
    try:
        # An LLM's answers are paid: each is journaled as it arrives (a kill loses none).
        writer = StoreWriter(store, durable=judge_kind(args.judge).takes_model)
        judges = GradeJudges(args, docs, writer, say, notice)
        if store is not None:
            store.add_secrets(judges.secrets)
            check_prompts(store, _prompts_of(judges), allow_changed=args.allow_changed_prompt)
            if not args.dry_run and (found := read_back_unsaved(store, args.out)):
                say(f"{found:,} paid answers a full disk left in {args.out} are now stored")
        # A full disk stops the run: paid answers no journal took go to --out (and are said).
        with saving_unsaved(args.out, writer):
            report = await grade_pairs(
                pairs,
                judges.members,
                store=store,
                writer=writer,
                verify_judge=judges.verifier,
                concurrency=args.concurrency,
                max_cost=args.max_cost,
                dry_run=args.dry_run,
                progress=progress,
                secrets=judges.secrets,
                stream_final=True,
                before_sending=judges.check_key,
                **options,
            )
        report.answers_by_server = judges.answers_by_server()
        report.cached_reported = judges.cached_reported()
        report.local = judges.local()
    finally:
        if judges is not None:
            await judges.aclose()
        if store is not None:
            store.close()
    return report, judges.verifier is not None
