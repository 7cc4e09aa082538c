"""A grading run's OUTPUT judgments when it combines answers: building, keying and storing them.

An ensemble's is keyed by the members' fingerprints and the rule, a verified one by both judges' and
the rule; one identical to the stored one is reused, any other stored with the answer that completed
it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from grader.grading.pairs import Pair
from grader.grading.report import GradingReport
from grader.judges.base import Judge
from grader.judges.ensemble import AGGREGATE_RULE, VERIFY_RULE, apply_verification, combine_members
from grader.keys import ContentKeys
from grader.models import Judgment
from grader.store.judgment_rows import time_text
from grader.store.store import Store


def for_pair(judgment: Judgment, pair: Pair) -> Judgment:
    """`judgment` as the answer for `pair`: a stored answer may have been given to another pair
    with the same texts (same content key) under other ids."""
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
    """Make each output the one the store holds (another process's first answer is final), reading
    only the rows that differ; `final`: pairs whose output is a stored ok answer."""
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


def ensemble_fingerprint(fingerprints: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The fingerprint an ensemble's combined judgment is keyed by: its members' fingerprints
    and the aggregation rule."""
    return {"ensemble": list(fingerprints), "aggregate": AGGREGATE_RULE}


def _same(stored: Judgment, rebuilt: Judgment) -> bool:
    """Whether a stored output judgment says what the rebuilt one says (times and ids aside)."""
    skip = {"created_at", "query_id", "doc_id"}
    return stored.model_dump(exclude=skip) == rebuilt.model_dump(exclude=skip)


class OutputJudgments:
    """The combined / verified output judgments of one run: their keys, the stored ones, and
    the new or changed ones waiting to be stored with the answer that completed them."""

    def __init__(
        self,
        judges: Sequence[Judge],
        fingerprints: list[dict[str, Any]],
        verify_fingerprint: dict[str, Any] | None,
        *,
        dry_run: bool = False,
    ) -> None:
        self.ensemble = len(judges) > 1
        self.ensemble_fingerprint = ensemble_fingerprint(fingerprints)
        primary_fp = fingerprints[0] if not self.ensemble else self.ensemble_fingerprint
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
        ensemble_key = final_key = None
        if self.ensemble:
            ensemble_key = self._ensemble_keys.key(pair.query.text, pair.doc.text)
        if self._final_keys is not None:
            final_key = self._final_keys.key(pair.query.text, pair.doc.text)
        return ensemble_key, final_key

    def load(self, store: Store | None, keys: list[str]) -> None:
        """Look up the output judgments earlier runs stored under `keys`."""
        if store is not None and keys:
            self.stored = store.get_many(keys)

    def take_group(self) -> list[tuple[Judgment, dict[str, Any] | None]]:
        """The output judgments queued since the last call (with their fingerprints)."""
        group, self.group = self.group, []
        return group

    def _output(self, judgment: Judgment, fingerprint: dict[str, Any], pair: Pair) -> Judgment:
        """A combined output judgment: the stored one when identical (a rerun changes nothing),
        else `judgment`, queued for the store."""
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
