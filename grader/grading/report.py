"""What a grading run did (`GradingReport`) and its outputs: in pair order as `--out` and qrels
lines, held or left in the store (`StoredOutputs`); combined ones (`OutputJudgments`) reused when
identical to the stored one, else stored with the answer that completed them."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from grader.grading.budget import Estimate
from grader.grading.pairs import Pair
from grader.judges.base import Judge
from grader.judges.ensemble import AGGREGATE_RULE, VERIFY_RULE, apply_verification, combine_members
from grader.keys import ContentKeys
from grader.models import Judgment, Usage
from grader.store.judgment_rows import judgment_json, time_text
from grader.store.reading import BLOCK, Block, StoredReader, StoredRef
from grader.store.store import Store


@dataclass
class GradingReport:
    """What a grading run did; `judgments` holds one output judgment per finished pair."""

    pairs: int = 0
    judgments: list[Judgment] = field(default_factory=list)
    cached: int = 0  # pairs answered wholly from the store
    graded: int = 0  # pairs that needed requests and ended ok
    failed: int = 0  # pairs that ended failed (a rerun retries them)
    pending: int = 0  # pairs not finished (interrupted, budget reached, fatal error)
    requests: int = 0  # judge calls made (each may be several HTTP attempts)
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0  # USD of the priced judgments
    # Whether any reply said its cached prompt tokens (None: no judge that sends requests).
    cached_reported: bool | None = None
    unpriced: int = 0  # requests that used tokens but have no price (cost unknown, not 0)
    local: bool = False  # every judge's server is on this machine: unpriced, with no hint
    interrupted: bool = False
    budget_reached: bool = False
    stored_ok: int = 0  # judge answers found ok in the store before starting
    stored_failed: int = 0  # judge answers found failed in the store (to retry)
    adopted: int = 0  # answers another process sharing the store paid for during this run
    # Pairs left not done: another live process held their key for `HOLD_WAIT_S`, unanswered.
    held_elsewhere: int = 0
    estimate: Estimate | None = None  # dry run: what the remaining requests would take
    # Judge answers given to pairs, by judge id: asked this run, and reused from the store.
    asked_by_judge: dict[str, int] = field(default_factory=dict)
    stored_by_judge: dict[str, int] = field(default_factory=dict)
    # Replies per server when --base-url is repeated, by URL without credentials.
    answers_by_server: dict[str, int] = field(default_factory=dict)
    to_send: list[tuple[str, str, str]] = field(default_factory=list)  # dry run: (qid, did, judge)
    # Dry run: pairs whose request is another pair's (the same texts under other ids).
    shared: int = 0
    # With `stream_final`: the outputs that are stored final answers, left in the store.
    stored_outputs: StoredOutputs | None = None

    def pay(self, usage: Usage, cost: float | None) -> None:
        """Count tokens and USD paid for; tokens without a price are `unpriced`, never $0."""
        self.usage = self.usage + usage
        self.cost += cost or 0.0
        self.unpriced += cost is None and bool(usage.prompt_tokens or usage.completion_tokens)

    def done(self) -> int:
        """How many pairs have an output judgment (held in `judgments` or left in the store)."""
        stored = len(self.stored_outputs.rows) if self.stored_outputs is not None else 0
        return len(self.judgments) + stored

    def blocks(self) -> Iterator[Block]:
        """Every output in pair order as `--out` and qrels lines, a block at a time."""
        so = self.stored_outputs
        if so is None:
            yield from _held_blocks(self.judgments)
            return
        held = iter(self.judgments)
        order, taken, at = so.order, 0, 0
        with StoredReader(so.path) as reader:
            while at < len(order):
                end = order.find(0 if order[at] else 1, at)
                end = len(order) if end < 0 else end
                if order[at]:
                    yield from reader.blocks(so.rows[taken : taken + end - at])
                    taken += end - at
                else:
                    yield from _held_blocks([next(held) for _ in range(end - at)])
                at = end


def _held_blocks(judgments: Sequence[Judgment]) -> Iterator[Block]:
    """The `--out` and qrels lines of held judgments, a block at a time (not ~0.7 GB)."""
    for start in range(0, len(judgments), BLOCK):
        block = judgments[start : start + BLOCK]
        qrels = "".join(
            f"{j.query_id} 0 {j.doc_id} {j.grade}\n" for j in block if j.grade is not None
        )
        yield Block("".join(judgment_json(j) + "\n" for j in block), qrels, len(block))


@dataclass
class StoredOutputs:
    """Output judgments a run leaves in the store, read back as the outputs are written."""

    path: str
    rows: list[StoredRef]  # (judgments rowid, query_id, doc_id, stored key) of each, in pair order
    order: bytearray  # per output in pair order: 1 from `rows`, 0 from the report's judgments


def for_pair(judgment: Judgment, pair: Pair) -> Judgment:
    """`judgment` under the ids of `pair` (an answer is shared by pairs of equal texts)."""
    if judgment.query_id == pair.query.query_id and judgment.doc_id == pair.doc.doc_id:
        return judgment
    return judgment.model_copy(update={"query_id": pair.query.query_id, "doc_id": pair.doc.doc_id})


def read_back(
    store: Store,
    pairs: Sequence[Pair],
    outputs: list[Judgment | None],
    final: Collection[int],
    report: GradingReport,
) -> None:
    """Make each output the one the store holds (another process's first answer is final)."""
    held = [(i, j) for i, j in enumerate(outputs) if j is not None and i not in final]
    stamps = store.stamps(j.key for _, j in held)
    differ: list[tuple[int, Judgment]] = []
    for i, held_judgment in held:
        stamp = (held_judgment.status, time_text(held_judgment.created_at))
        if stamps.get(held_judgment.key, stamp) != stamp:
            differ.append((i, held_judgment))
    if not differ:
        return
    stored = store.get_many(j.key for _, j in differ)
    for i, ours in differ:
        theirs = stored.get(ours.key)
        if theirs is None:
            continue
        if ours.status != "ok" and theirs.status == "ok":
            report.failed -= 1
            report.graded += 1
        outputs[i] = for_pair(theirs, pairs[i])


def primary_fingerprint(fingerprints: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a run's first output is keyed by: its judge's, or an ensemble's members and rule."""
    if len(fingerprints) == 1:
        return fingerprints[0]
    return {"ensemble": list(fingerprints), "aggregate": AGGREGATE_RULE}


def _same(stored: Judgment, rebuilt: Judgment) -> bool:
    """Whether a stored output judgment says what the rebuilt one says (times and ids aside)."""
    skip = {"created_at", "query_id", "doc_id"}
    return stored.model_dump(exclude=skip) == rebuilt.model_dump(exclude=skip)


class OutputJudgments:
    """A run's combined / verified output judgments: keys, stored ones, ones to store."""

    def __init__(
        self,
        judges: Sequence[Judge],
        fingerprints: list[dict[str, Any]],
        verify_fingerprint: dict[str, Any] | None,
        *,
        dry_run: bool = False,
    ) -> None:
        self.ensemble = len(judges) > 1
        self.ensemble_fingerprint = primary_fp = primary_fingerprint(fingerprints)
        self.final_fingerprint: dict[str, Any] | None = (
            None
            if verify_fingerprint is None
            else {"verified": primary_fp, "verifier": verify_fingerprint, "rule": VERIFY_RULE}
        )
        self._ensemble_keys = ContentKeys(self.ensemble_fingerprint)
        self._final_keys = (
            ContentKeys(self.final_fingerprint) if self.final_fingerprint is not None else None
        )
        self.ensemble_id = "ensemble(" + ",".join(j.judge_id for j in judges) + ")"
        self.dry_run = dry_run
        # Output judgments stored by earlier runs (combined / verified), by key.
        self.stored: dict[str, Judgment] = {}
        # Output judgments to store with the current step's answer (see `take_group`).
        self.group: list[tuple[Judgment, dict[str, Any] | None]] = []

    def keys(self, pair: Pair) -> tuple[str | None, str | None]:
        """The pair's (combined key, verified key); None where the run has no such output."""
        texts = pair.query.text, pair.doc.text
        ensemble_key = self._ensemble_keys.key(*texts) if self.ensemble else None
        final_key = self._final_keys.key(*texts) if self._final_keys is not None else None
        return ensemble_key, final_key

    def take_group(self) -> list[tuple[Judgment, dict[str, Any] | None]]:
        """The output judgments queued since the last call (with their fingerprints)."""
        group, self.group = self.group, []
        return group

    def _output(self, judgment: Judgment, fingerprint: dict[str, Any], pair: Pair) -> Judgment:
        """The stored output judgment when identical, else `judgment`, queued for the store."""
        stored = self.stored.get(judgment.key)
        if stored is not None and _same(stored, judgment):
            return for_pair(stored, pair)
        if not self.dry_run:
            self.group.append((judgment, fingerprint))
        return judgment

    def combined(self, members: list[Judgment], key: str, pair: Pair) -> Judgment:
        """The ensemble's output judgment for `pair` from its members' answers."""
        combined = combine_members(members, key=key, judge_id=self.ensemble_id)
        return self._output(combined, self.ensemble_fingerprint, pair)

    def verified(
        self, primary: Judgment, answer: Judgment, key: str | None, pair: Pair
    ) -> Judgment:
        """The verified output judgment for `pair` from the first judgment and the verifier's."""
        assert self.final_fingerprint is not None
        final = apply_verification(primary, answer, key=key)
        return self._output(final, self.final_fingerprint, pair)
