"""What a grading run did (`GradingReport`), and its outputs in pair order as `--out` and qrels
lines, a block at a time: those it holds, and those it left in the store (`StoredOutputs`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from grader.grading.budget import Estimate
from grader.models import Judgment, Usage
from grader.store.judgment_rows import judgment_json
from grader.store.lookup import BLOCK, Block, StoredReader, StoredRef


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
    # Pairs left not done because another live process held their key for `HOLD_WAIT_S`
    # without storing an answer (hung, or far slower than this run).
    held_elsewhere: int = 0
    estimate: Estimate | None = None  # dry run: what the remaining requests would take
    # Judge answers given to pairs, by judge id: asked this run (ok or failed), and reused
    # from the store (or stored meanwhile by another process sharing it).
    asked_by_judge: dict[str, int] = field(default_factory=dict)
    stored_by_judge: dict[str, int] = field(default_factory=dict)
    # Replies (status 200) per server when requests were spread over several (--base-url
    # repeated), by URL without credentials; empty with one server.
    answers_by_server: dict[str, int] = field(default_factory=dict)
    to_send: list[tuple[str, str, str]] = field(default_factory=list)  # dry run: (qid, did, judge)
    # Dry run: pairs whose request is another pair's (the same query and document texts under
    # other ids), sent once and its answer given to each.
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
        """Every output in pair order as `--out` and qrels lines (a failed judgment unjudged, never
        0), a block of consecutive ones at a time, streamed from the store where left there."""
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
