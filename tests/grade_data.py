"""A small grading data set written into a test's folder (queries, docs, a run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GradeFiles:
    queries: Path
    docs: Path
    run: Path
    n_pairs: int

    def args(self, *extra: str | Path) -> list[str]:
        """`relgrade grade` arguments for these files plus `extra`."""
        base = ["grade", "--queries", self.queries, "--docs", self.docs, "--run", self.run]
        return [str(a) for a in (*base, *extra)]


def write_grade_files(folder: Path, *, n_queries: int = 3, depth: int = 4) -> GradeFiles:
    """`n_queries` queries, each with `depth` ranked docs out of a shared pool of documents."""
    topics = ["cache eviction", "json config parsing", "retry backoff", "sqlite wal mode"]
    queries = folder / "queries.tsv"
    queries.write_text("".join(f"q{i}\t{topics[i % len(topics)]} {i}\n" for i in range(n_queries)))
    docs = folder / "docs.jsonl"
    words = ["cache", "eviction", "json", "config", "retry", "backoff", "sqlite", "wal", "cats"]
    n_docs = n_queries * depth
    with docs.open("w") as fh:
        for d in range(n_docs):
            text = " ".join(words[(d + k) % len(words)] for k in range(4)) + f" doc {d}"
            fh.write(json.dumps({"doc_id": f"d{d}", "text": text, "title": f"doc {d}"}) + "\n")
    run = folder / "run.txt"
    with run.open("w") as fh:
        for q in range(n_queries):
            for r in range(depth):
                fh.write(f"q{q} Q0 d{q * depth + r} {r + 1} {10 - r} bm25\n")
    return GradeFiles(queries, docs, run, n_queries * depth)
