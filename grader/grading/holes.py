"""Labels on top of people's: which pairs of the runs people judged, which are holes, and the merged
qrels (every human line, then the LLM's grade of each hole by `--llm-scale`; a failed judgment has
no grade, so its pair stays a hole)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field

import pandas as pd

from grader.errors import InputError
from grader.io.grades import scale_text
from grader.keys import json_string

PairId = tuple[str, str]
OTHER_QRELS = "give the qrels of the runs' collection, or leave out --skip-judged"


@dataclass
class Holes:
    """The runs' pairs against people's grades: which are judged, which are holes."""

    human: pd.DataFrame
    candidates: int = 0  # distinct pairs within depth over the runs
    judged: list[PairId] = field(default_factory=list)  # judged candidates, in pair order
    also: set[PairId] = field(default_factory=set)  # judged pairs graded too (--also-judged)
    not_retrieved: int = 0  # human pairs no run returned within depth (kept, not graded)
    skipped: int = 0  # pairs to grade left out for an unknown query or doc id (--skip-missing)

    @property
    def holes(self) -> int:
        return self.candidates - len(self.judged)


def check_overlap(human: pd.DataFrame, candidates: Collection[PairId], judged: int) -> None:
    """A qrels sharing no query, or no pair, with the runs is another collection's: an error."""
    path = human.attrs.get("path")
    if not candidates:
        return
    run_queries = {q for q, _ in candidates}
    if not run_queries & set(human["query_id"].astype(str)):
        raise InputError(
            f"shares no query id with the runs ({len(run_queries)} queries): is it the qrels "
            "of another collection?",
            path=path,
            hint=OTHER_QRELS,
        )
    if not judged:
        raise InputError(
            f"holds none of the runs' {len(candidates):,} pairs within --depth: is it the "
            "qrels of another collection (other doc ids)?",
            path=path,
            hint=OTHER_QRELS,
        )


def with_source(lines: str, pairs: Iterator[PairId], also: Collection[PairId]) -> str:
    """JSONL judgment lines, each given `"source"`: "human" for an also-judged pair, else "llm";
    `pairs` yields each line's ids in line order."""
    out = []
    for line in lines.splitlines():
        qid, did = next(pairs)
        head = f'{{"query_id":{json_string(qid).decode()},"doc_id":{json_string(did).decode()},'
        if not line.startswith(head):
            record = json.loads(line)
            qid, did = record["query_id"], record["doc_id"]
        source = "human" if (qid, did) in also else "llm"
        out.append(f'{line[:-1]},"source":"{source}"}}\n')
    return "".join(out)


def merged_lines(
    human: pd.DataFrame, llm_qrels: Iterable[str], also: Collection[PairId], scale: dict[int, int]
) -> Iterator[str]:
    """The merged qrels: every human line as written, then the LLM's (mapped) grade of each
    hole. `llm_qrels` are `qid 0 docid grade` lines of ok judgments (failed ones have none)."""
    for qid, did, grade in human[["query_id", "doc_id", "grade"]].itertuples(index=False):
        yield f"{qid} 0 {did} {int(grade)}\n"
    for block in llm_qrels:
        for line in block.splitlines():
            qid, _, did, grade = line.split()
            if (qid, did) not in also:
                yield f"{qid} 0 {did} {scale[int(grade)]}\n"


def holes_summary(
    holes: Holes,
    *,
    sent: int,
    cached: int,
    failed: int,
    scale: dict[int, int] | None,
    dry_run: bool = False,
) -> str:
    """`pairs 4,000: judged by people 3,100, holes 900 (sent 610, cached 290)` and what else
    a user should know (also-judged, failed holes, human pairs not retrieved, the scale)."""
    also = len(holes.also)
    text = f"pairs {holes.candidates:,}: judged by people {len(holes.judged):,}"
    if also:
        text += f" ({also:,} of them graded by the LLM too, --also-judged)"
    text += f", holes {holes.holes:,} "
    verb = "to send" if dry_run else "sent"
    text += f"({'LLM answers ' if also else ''}{verb} {sent:,}, cached {cached:,}"
    if holes.skipped:
        text += f", skipped {holes.skipped:,}: unknown query or doc id under --skip-missing"
    text += ")"
    if failed:
        text += f"; {failed:,} failed (no grade: they stay holes in --merged-out)"
    if holes.not_retrieved:
        text += (
            f"; {holes.not_retrieved:,} human-graded pairs are not in the runs' top --depth "
            "(ignored here; kept in --merged-out)"
        )
    if scale is not None:
        text += f"; LLM grades mapped by --llm-scale {scale_text(scale)}"
    return text
