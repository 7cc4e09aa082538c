"""The pairs of bench/real_quality.py: TREC DL 2019 passage pairs stratified by human grade,
written as the files `relgrade grade` reads, and the published LLM label sets on them."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_CHARS = 1200
GRADES = (0, 1, 2, 3)
Pair = tuple[str, str]


@dataclass
class Pairs:
    """The chosen pairs in their fixed order (grades taken in turn, so every prefix of 4k pairs
    holds k of each grade), people's grades, and the files that describe them."""

    order: list[Pair]
    human: dict[Pair, int]
    queries: Path
    docs: Path
    work: Path

    def __len__(self) -> int:
        return len(self.order)

    def human_grades(self) -> list[int]:
        return [self.human[p] for p in self.order]

    def run_of_first(self, k: int) -> Path:
        """A TREC run holding the first `k` pairs (each query's documents in the order drawn)."""
        path = self.work / f"run-first-{k}.txt"
        ranks: dict[str, int] = {}
        lines = []
        for qid, did in self.order[:k]:
            ranks[qid] = ranks.get(qid, 0) + 1
            lines.append(f"{qid} Q0 {did} {ranks[qid]} {1000 - ranks[qid]} pairs\n")
        path.write_text("".join(lines), encoding="utf-8")
        return path


def _qrels(path: Path) -> Iterator[tuple[str, str, int]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            yield parts[0], parts[2], int(parts[3])


def _passages(path: Path) -> dict[str, str]:
    out = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out[str(row["docid"])] = str(row["doc"])
    return out


def load_pairs(data: Path, n: int, seed: int, work: Path) -> Pairs:
    """`n` pairs (n/4 per human grade) whose passages are under MAX_CHARS characters, drawn
    with `seed`; the same seed gives the same order, and a smaller n a prefix of it."""
    if n < 4 or n % 4:
        raise SystemExit(f"--pairs must be a positive multiple of 4, not {n}")
    passages = _passages(data / "dl2019_document.jsonl")
    by_grade: dict[int, list[Pair]] = {g: [] for g in GRADES}
    human: dict[Pair, int] = {}
    for qid, did, grade in _qrels(data / "2019qrels-pass.txt"):
        if grade in by_grade and did in passages and len(passages[did]) < MAX_CHARS:
            by_grade[grade].append((qid, did))
            human[(qid, did)] = grade
    drawn = []
    for grade in GRADES:
        pool = sorted(by_grade[grade])
        random.Random(f"{seed}:{grade}").shuffle(pool)
        if len(pool) < n // 4:
            raise SystemExit(f"only {len(pool)} pairs of grade {grade}")
        drawn.append(pool[: n // 4])
    order = [pair for turn in zip(*drawn, strict=True) for pair in turn]
    texts = dict(
        line.split("\t", 1)
        for line in (data / "msmarco-test2019-queries.tsv").read_text("utf-8").splitlines()
    )
    queries, docs = work / "queries.tsv", work / "docs.jsonl"
    qids = sorted({q for q, _ in order})
    queries.write_text("".join(f"{q}\t{texts[q].strip()}\n" for q in qids), encoding="utf-8")
    with docs.open("w", encoding="utf-8") as fh:
        for did in sorted({d for _, d in order}):
            fh.write(json.dumps({"doc_id": did, "text": passages[did]}) + "\n")
    return Pairs(order, {p: human[p] for p in order}, queries, docs, work)


def published_label_sets(data: Path, pairs: Pairs) -> list[tuple[str, dict[Pair, int]]]:
    """Each label set of `data/llm-labels` on the chosen pairs, by file stem."""
    out = []
    for path in sorted((data / "llm-labels").glob("*.txt")):
        chosen = set(pairs.order)
        grades = {(q, d): g for q, d, g in _qrels(path) if (q, d) in chosen}
        out.append((path.stem, grades))
    return out
