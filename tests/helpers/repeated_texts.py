"""The data of the repeated-texts tests: query q2 has q1's text, docs d2 and d3 have d1's text,
so the 10 id pairs of the run hold 6 distinct contents; grades by content for the old prompt and
the new (strict) one; the files of one test and what its outputs and store hold."""

from __future__ import annotations

import json
import re
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels
from grader.store.store import Store
from tests.batch_helpers import new_prompt
from tests.fakeserver import FakeServer, request_text
from tests.helpers.old_stores import write_old_store

QUERIES = {"q1": "how do tides work", "q2": "how do tides work", "q3": "what is photosynthesis"}
MOON = "Tides rise and fall because the moon pulls on the oceans."
DOCS = {
    "d1": MOON,
    "d2": MOON,
    "d3": MOON,
    "d4": "Plants turn sunlight, water and carbon dioxide into sugar.",
    "d5": "A used car loses value quickly in its first years.",
}
RUN = {
    "q1": ["d1", "d2", "d4", "d5"],
    "q2": ["d1", "d3", "d4"],
    "q3": ["d2", "d4", "d5"],
}
ID_PAIRS = {(q, d) for q, docs in RUN.items() for d in docs}
CONTENTS = {(QUERIES[q], DOCS[d]) for q, d in ID_PAIRS}

# Grades by (query word, doc word), for the old prompt and the new (strict) one.
OLD = {("tides", "moon"): 3, ("tides", "sugar"): 1, ("tides", "car"): 0}
OLD |= {("photosynthesis", "moon"): 0, ("photosynthesis", "sugar"): 3}
OLD |= {("photosynthesis", "car"): 0}
NEW = {("tides", "moon"): 2, ("tides", "sugar"): 1, ("tides", "car"): 0}
NEW |= {("photosynthesis", "moon"): 0, ("photosynthesis", "sugar"): 2}
NEW |= {("photosynthesis", "car"): 1}


def request_content(body: dict[str, Any]) -> tuple[str, str]:
    """(query text, document text) of a request: what the content key is made of."""
    text = request_text(body)  # the system text names the tags too: the user's come last
    query = re.findall(r"<query>\n(.*?)\n</query>", text, re.S)
    passage = re.findall(r"<passage>\n(?:Title:[^\n]*\n)?(.*?)\n</passage>", text, re.S)
    assert query and passage
    return query[-1], passage[-1]


def grade_words(query: str, doc: str) -> tuple[str, str]:
    q = "tides" if "tides" in query else "photosynthesis"
    d = "moon" if "moon" in doc else "sugar" if "sugar" in doc else "car"
    return q, d


def grade_fn(failing: tuple[str, str] | None = None) -> Any:
    def grade(body: dict[str, Any]) -> int:
        words = grade_words(*request_content(body))
        if "Be strict" not in request_text(body):
            return OLD[words]
        return 7 if words == failing else NEW[words]  # 7: out of range, never a valid reply

    return grade


def old_grade(q: str, d: str) -> int:
    return OLD[grade_words(QUERIES[q], DOCS[d])]


def new_grade(q: str, d: str) -> int:
    return NEW[grade_words(QUERIES[q], DOCS[d])]


class Files:
    """The queries, docs, run, price table and new prompt of one test, in `folder`."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        self.url = url
        self.db = folder / "s.db"
        self.queries = folder / "queries.tsv"
        self.queries.write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()), "utf-8")
        self.docs = folder / "docs.jsonl"
        self.docs.write_text(
            "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in DOCS.items()),
            "utf-8",
        )
        self.run = folder / "run.txt"
        self.run.write_text(
            "".join(
                f"{q} Q0 {d} {rank} {10 - rank} r\n"
                for q, docs in RUN.items()
                for rank, d in enumerate(docs, start=1)
            ),
            "utf-8",
        )
        self.prices = folder / "prices.toml"
        self.prices.write_text(
            '[models."fake-model"]\ninput = 1.0\ncached_input = 0.5\noutput = 2.0\n', "utf-8"
        )
        self.prompt = str(new_prompt(folder).source)

    def grade(self, *extra: str) -> int:
        return main(
            [
                "grade",
                "--queries", str(self.queries),
                "--docs", str(self.docs),
                "--run", str(self.run),
                "--model", "fake-model",
                "--base-url", self.url,
                "--store", str(self.db),
                "--prices", str(self.prices),
                "--quiet",
                *extra,
            ]
        )  # fmt: skip

    def regrade(
        self, capsys: pytest.CaptureFixture[str], *extra: str
    ) -> tuple[int, dict[str, Any]]:
        capsys.readouterr()
        code = main(
            [
                "regrade",
                "--store", str(self.db),
                "--prompt", self.prompt,
                "--model", "fake-model",
                "--base-url", self.url,
                "--format", "json",
                "--poll-interval", "0",
                "--prices", str(self.prices),
                "--quiet",
                *extra,
            ]
        )  # fmt: skip
        return code, json.loads(capsys.readouterr().out)


def pairs_of(path: Path) -> list[tuple[str, str]]:
    return [(j.query_id, j.doc_id) for j in read_judgments(path)]


def qrels_of(path: Path) -> dict[tuple[str, str], int]:
    frame = read_qrels(path)
    return {
        (q, d): int(g)
        for q, d, g in zip(frame["query_id"], frame["doc_id"], frame["grade"], strict=True)
    }


def store_pairs(db: Path, version: str) -> dict[tuple[str, str], int | None]:
    """Each id pair's grade under the prompt version, as the store gives it to every id pair."""
    with Store(db) as store:
        return {
            (q, d): j.grade
            for q, d, j in store.iter_pair_judgments()
            if j.prompt is not None and j.prompt.version == version
        }


def hand_diff(failed: AbstractSet[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    """n, changed, transition and kappa over the id pairs, computed here from the tables."""
    pairs = sorted(ID_PAIRS - failed)
    transition = [[0] * 4 for _ in range(4)]
    for q, d in pairs:
        transition[old_grade(q, d)][new_grade(q, d)] += 1
    old = [old_grade(q, d) for q, d in pairs]
    new = [new_grade(q, d) for q, d in pairs]
    return {
        "n": len(ID_PAIRS),
        "changed": sum(a != b for a, b in zip(old, new, strict=True)),
        "transition": transition,
        "kappa": cohen_kappa_score(old, new),
        "failed": len(failed),
    }


def asked_contents(server: FakeServer) -> list[tuple[str, str]]:
    return [request_content(body) for body in server.requests]


def as_old_store(db: Path) -> None:
    """Turn a store back into schema 2 (before the table of id pairs), as an older relgrade left
    it: one id pair per content key (the one its judgments row names)."""
    new = db.with_name("new.db")
    db.rename(new)
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    write_old_store(db, 2, new)
