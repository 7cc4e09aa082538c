"""Drawing a blind spot-check sample from judgments, for `relgrade sample` and the API."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.spotcheck.blind import BlindItem, blind_items, write_blind_csv
from calibration.spotcheck.manifest import Manifest, build_manifest, copy_manifest_beside
from calibration.spotcheck.sampling import SampleDraw, draw_sample
from grader.errors import InputError
from grader.models import Doc, Judgment, Query

Texts = Callable[[list[tuple[str, str]]], tuple[Mapping[str, Query], Mapping[str, Doc]]]
"""The query and document texts of the drawn pairs (empty mappings: ids only)."""

Budgets = Callable[[list[Judgment], set[tuple[str, str]]], Mapping[tuple[str, str], Any]]
"""The prompt each drawn pair was graded with (from the eligible judgments), so its document
is cut to that prompt's budget as the LLM saw it."""


@dataclass
class DrawnSample:
    """A drawn sample: pairs in the order people will see them, their texts, the manifest."""

    draw: SampleDraw
    items: list[BlindItem]
    manifest: Manifest
    failed: int
    human_graded: int

    def write(self, out: str | Path) -> Path:
        """The blind CSV at `out` and its manifest beside it (returned), both atomically."""
        write_blind_csv(out, self.items)
        return copy_manifest_beside(self.manifest, out)

    def summary_lines(self) -> list[str]:
        """What was drawn, as `relgrade sample` prints it."""
        draw = self.draw
        lines = [
            f"sampled {len(draw.pairs)} of {draw.population} eligible judgments "
            f"(strategy {draw.strategy}"
            + (f", {draw.allocation} allocation" if draw.allocation else "")
            + f", seed {draw.seed}); left out {self.failed} failed judgment(s) (no grade) and "
            f"{self.human_graded} pair(s) people already graded"
        ]
        counts = Counter(p.stratum for p in draw.pairs)
        if len(draw.strata) > 8:
            sizes = [int(info["size"]) for info in draw.strata.values()]
            low, high = min(sizes), max(sizes)
            each = f"{low} pairs each" if low == high else f"{low} to {high} pairs"
            lines.append(
                f"  {len(draw.strata)} strata of {each}; pairs drawn from {len(counts)} of them"
            )
        else:
            for name, info in draw.strata.items():
                line = f"  {name}: {counts.get(name, 0)} drawn of {int(info['size'])}"
                if draw.strategy not in ("uncertainty", "active"):
                    line += f" (inclusion probability {info['expected'] / info['size']:.4g})"
                lines.append(line)
        if draw.uncertainty_source:
            line = f"  uncertainty from {draw.uncertainty_source}"
            if draw.uncertainty_imputed:
                line += f"; {draw.uncertainty_imputed} pair(s) lacked it and got the maximum"
            lines.append(line)
        if draw.uncertainty_source == "distance to the threshold":
            lines.append(
                "  no judgment carries a grade distribution (graded without logprobs, e.g. "
                "--no-logprobs) nor an ensemble's grades: the draw leans on each grade's "
                "distance to the threshold only"
            )
        if draw.strategy == "active":
            lines.append(
                f"  drawn one at a time, the uncertain pairs more often ({draw.uniform_share:g} of "
                "each weight uniform); grade in the order given and stop when the annotation page "
                "says you may"
            )
        cut = sum(item.truncated for item in self.items)
        if cut:
            lines.append(
                f"  {cut} document(s) cut to their prompt's budget, as the LLM saw them (column "
                "truncated)"
            )
        return lines


def _single(values: list[str | None]) -> str | None:
    distinct = {v for v in values if v is not None}
    return distinct.pop() if len(distinct) == 1 else None


def draw_blind_sample(
    judgments: Sequence[Judgment],
    texts: Texts,
    *,
    source: str | Path | None,
    excluded: Collection[tuple[str, str]] = (),
    budgets: Budgets | None = None,
    **design: Any,
) -> DrawnSample:
    """Draw from the ok judgments not in `excluded` (`design`: `draw_sample`'s keywords);
    `source`: the judgments file the manifest records; `budgets`: each prompt's budget."""
    ok = [j for j in judgments if j.status == "ok"]
    failed = len(judgments) - len(ok)
    graded = set(excluded)
    eligible: list[Judgment] = [j for j in ok if (j.query_id, j.doc_id) not in graded]
    draw = draw_sample(eligible, **design)
    pairs = [(p.query_id, p.doc_id) for p in draw.pairs]
    queries, docs = texts(pairs)
    cut = budgets(eligible, set(pairs)) if budgets is not None else None
    items = blind_items(pairs, queries, docs, allow_missing_text=not (queries or docs), budgets=cut)
    manifest = build_manifest(
        draw,
        source=source,
        prompt=_single([str(j.prompt) if j.prompt else None for j in eligible]),
        judge=_single([j.judge for j in eligible]),
        excluded={"failed": failed, "human_graded": len(ok) - len(eligible)},
    )
    return DrawnSample(draw, items, manifest, failed, len(ok) - len(eligible))


def read_population(path: str, strategy: str) -> list[Judgment]:
    """The judgments to sample from: a judgments JSONL as it is, or TREC qrels (as
    `calibrate --llm` takes them) read as ok judgments with a grade and nothing more."""
    from grader.io.files import iter_lines
    from grader.io.grades import looks_like_qrels

    first = next((line for _, line in iter_lines(path) if line.strip()), "")
    if not looks_like_qrels(first):
        from grader.io.judgments import read_judgments

        return read_judgments(path)
    if strategy == "uncertainty":
        raise InputError(
            "--strategy uncertainty needs each pair's uncertainty (logprob confidence or an "
            "ensemble's disagreement), and TREC qrels hold grades only",
            path=path,
            hint="give the judgments JSONL that `relgrade grade --out` wrote, or another "
            "--strategy (stratified, uniform, active, low, query-balanced, whole-queries)",
        )
    from grader.io.grades import read_llm_grades

    frame = read_llm_grades(path)
    judge = f"qrels:{Path(path).name}"
    return [
        Judgment(
            query_id=qid, doc_id=did, grade=int(grade), status="ok", judge=judge, key=f"{qid} {did}"
        )
        for qid, did, grade in zip(frame["query_id"], frame["doc_id"], frame["grade"], strict=True)
    ]
