"""Which stored pairs a regrade takes: a pair's old side is its latest output judgment (a failed one
of the new version is retried). Criteria (`--select`, all must hold): `all`, `failed`, `grade<=N`,
`sample FILE`, `disagreement`, `prompt=OLD`."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.grading.pairs import Pair
from grader.grading.report import for_pair
from grader.io.files import read_text
from grader.io.streams import allow_long_csv_fields
from grader.keys import content_key
from grader.models import Doc, Judgment, PromptRef, Query
from grader.regrade.diff import VersionPair
from grader.store.store import Store


@dataclass(frozen=True)
class Criterion:
    """One selection criterion: kind in all|failed|grade<=|sample|disagreement|prompt."""

    kind: str
    value: Any = None


def parse_selection(tokens: Sequence[str]) -> list[Criterion]:
    """`["prompt=passage-v1", "grade<=1"]` or `["sample", "FILE"]` -> criteria (all must hold)."""
    criteria: list[Criterion] = []
    items = list(tokens) or ["all"]
    while items:
        token = items.pop(0).strip()
        if token in ("all", "failed", "disagreement"):
            criteria.append(Criterion(token))
        elif token.startswith("grade<="):
            if token[7:] not in ("0", "1", "2", "3"):
                raise InputError(f"--select {token}: N must be 0, 1, 2 or 3", hint="grade<=1")
            criteria.append(Criterion("grade<=", int(token[7:])))
        elif token.startswith("prompt="):
            if token == "prompt=":
                raise InputError("--select prompt=OLD needs a prompt name", hint="prompt=passage")
            criteria.append(Criterion("prompt", token[7:]))
        elif token == "sample" or token.startswith(("sample=", "sample:")):
            if token == "sample" and not items:
                raise InputError("--select sample needs a FILE", hint="--select sample s.csv")
            path = items.pop(0) if token == "sample" else token[7:]
            criteria.append(Criterion("sample", read_pair_list(path)))
        else:
            raise InputError(
                f"--select: unknown criterion {token!r}",
                hint="use all, failed, grade<=N, sample FILE, disagreement or prompt=OLD",
            )
    return criteria


def absolute_selection(tokens: Sequence[str]) -> list[str]:
    """`tokens` with each sample FILE made absolute (what a batch job records)."""
    out: list[str] = []
    for token in tokens:
        if out and out[-1] == "sample":
            token = str(Path(token).resolve())
        elif token.startswith(("sample=", "sample:")):
            token = token[:7] + str(Path(token[7:]).resolve())
        out.append(token)
    return out


def read_pair_list(path: str | Path) -> frozenset[tuple[str, str]]:
    """(query_id, doc_id) pairs of a sample CSV, TREC qrels/run, or `qid docid` file."""
    text = read_text(path)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise InputError("no pairs in the file", path=path, hint="a sample CSV or qrels")
    pairs: set[tuple[str, str]] = set()
    if "," in lines[0]:  # (csv, not pandas: a row with extra cells must not shift the columns)
        allow_long_csv_fields()
        reader = csv.DictReader(io.StringIO(text))
        fields = reader.fieldnames or []
        qcol = next((c for c in ("query_id", "qid") if c in fields), None)
        dcol = next((c for c in ("doc_id", "docid") if c in fields), None)
        if qcol is None or dcol is None:
            raise InputError("a CSV of pairs needs query_id and doc_id columns", path=path, line=1)
        for row in reader:
            qid, docid = row[qcol], row[dcol]
            if qid is None or docid is None:
                raise InputError(
                    f"the row has no {qcol if qid is None else dcol}",
                    path=path,
                    line=reader.line_num,
                )
            pairs.add((qid.strip(), docid.strip()))
        return frozenset(pairs)
    for number, line in enumerate(lines, start=1):
        parts = line.split()
        if len(parts) == 2:
            pairs.add((parts[0], parts[1]))
        elif len(parts) in (4, 6):  # qrels: qid iter docid grade; run: qid Q0 docid rank score tag
            pairs.add((parts[0], parts[2]))
        else:
            raise InputError(
                f"expected `qid docid`, qrels or run columns, got {len(parts)} fields",
                path=path,
                line=number,
            )
    return frozenset(pairs)


def _prompt_matches(judgment: Judgment, name: str) -> bool:
    """`name`: the prompt's name, name@version, name-vN, or sha256 (bare or `sha256:` tagged)."""
    prompt = judgment.prompt
    if prompt is None:
        return judgment.judge == name
    name = name.removeprefix("sha256:")
    return name in (
        prompt.name,
        f"{prompt.name}@{prompt.version}",
        f"{prompt.name}-v{prompt.version}",
        prompt.sha256,
    )


def _disagrees(judgment: Judgment) -> bool:
    """Whether the judges of a combined judgment disagreed, or one of them failed."""
    if judgment.disagreement is not None and judgment.disagreement > 0:
        return True
    if judgment.judges is not None and any(g is None for g in judgment.judges.values()):
        return True  # a failed member: agreement is unknown
    verification = judgment.verification or {}
    first = (verification.get("primary") or {}).get("grade")
    second = verification.get("verifier") or {}
    if second and second.get("status") != "ok":
        return True  # the verifier failed: the second look did not happen
    return first is not None and second.get("grade") is not None and first != second["grade"]


def _parts(store: Store, output: Judgment, query: Query, doc: Doc) -> set[str]:
    """The keys of the answers an output judgment was combined from (members, verifier)."""
    keys: set[str] = set()
    verification = output.verification or {}
    for side in ("primary", "verifier"):
        key = (verification.get(side) or {}).get("key")
        if isinstance(key, str):
            keys.add(key)
    fingerprint: Any = store.fingerprint(output.key) or {}
    first = fingerprint.get("verified", fingerprint) if isinstance(fingerprint, dict) else {}
    members = first.get("ensemble") if isinstance(first, dict) else None
    for member in members or []:
        keys.add(content_key(member, query.text, doc.text))
    keys.discard(output.key)
    return keys


def _kept_member(judgments: Sequence[Judgment], members: set[str]) -> set[str]:
    """The new ensemble's member that was an answer before it: the old side on a rerun."""
    ordered = sorted((j for j in judgments if j.key in members), key=lambda j: j.created_at)
    if len(ordered) > 1 and ordered[0].created_at < ordered[1].created_at:
        return {ordered[0].key}
    return set()


def _keeps(judgment: Judgment, criterion: Criterion) -> bool:
    if criterion.kind == "failed":
        return judgment.status == "failed"
    if criterion.kind == "grade<=":
        return judgment.grade is not None and judgment.grade <= int(criterion.value)
    if criterion.kind == "sample":
        return (judgment.query_id, judgment.doc_id) in criterion.value
    if criterion.kind == "disagreement":
        return _disagrees(judgment)
    return True  # all, prompt (applied before choosing the old judgment)


@dataclass(frozen=True)
class Candidate:
    """A selected pair with its texts, its old judgment and its key under the new judge."""

    query: Query
    doc: Doc
    old: Judgment
    new_key: str


def select_candidates(
    store: Store, criteria: Sequence[Criterion], fingerprint: dict[str, Any]
) -> list[Candidate]:
    """The pairs to regrade, in (query_id, doc_id) order (see the module docstring)."""
    prompts = [c.value for c in criteria if c.kind == "prompt"]
    queries = store.queries()
    docs = store.docs()
    new_keys: dict[tuple[str, str], str] = {}
    rows: dict[tuple[str, str], list[Judgment]] = {}
    for qid, did, stored in store.iter_pair_judgments():
        pair = (qid, did)
        query, doc = queries.get(qid), docs.get(did)
        if query is None or doc is None:
            continue  # graded before texts were kept: cannot be regraded from the store
        if pair not in new_keys:
            new_keys[pair] = content_key(fingerprint, query.text, doc.text)
        rows.setdefault(pair, []).append(for_pair(stored, Pair(query, doc)))
    latest: dict[tuple[str, str], Judgment] = {}
    for pair, judgments in rows.items():
        query, doc = queries[pair[0]], docs[pair[1]]
        parts: set[str] = set()
        for judgment in judgments:
            if judgment.judges is not None or judgment.verification is not None:
                found = _parts(store, judgment, query, doc)
                if judgment.key == new_keys[pair]:
                    found -= _kept_member(judgments, found)
                parts |= found
        for judgment in judgments:
            if judgment.key == new_keys[pair] or judgment.key in parts:
                continue
            if any(not _prompt_matches(judgment, name) for name in prompts):
                continue
            current = latest.get(pair)
            if current is None or judgment.created_at > current.created_at:
                latest[pair] = judgment
        if pair not in latest:
            # Only the new version is stored. When it failed, regrading is a retry of that very
            # judgment (same prompt and model), so it is its own old side.
            retry = next((j for j in judgments if j.key == new_keys[pair]), None)
            if (
                retry is not None
                and retry.status == "failed"
                and all(_prompt_matches(retry, name) for name in prompts)
            ):
                latest[pair] = retry
    chosen: list[Candidate] = []
    for pair in sorted(latest):
        old = latest[pair]
        if all(_keeps(old, c) for c in criteria):
            chosen.append(Candidate(queries[pair[0]], docs[pair[1]], old, new_keys[pair]))
    return chosen


def old_versions(store: Store, criteria: Sequence[Criterion]) -> tuple[list[PromptRef], list[str]]:
    """The distinct prompts and judge ids of the old side: `regrade`'s defaults."""
    probe = {"old prompts": True}  # no judgment has this key: nothing counts as the new version
    prompts: dict[tuple[str, str], PromptRef] = {}
    judges: set[str] = set()
    for c in select_candidates(store, criteria, probe):
        judges.add(c.old.judge)
        if c.old.prompt is not None:
            prompts[(str(c.old.prompt), c.old.prompt.sha256)] = c.old.prompt
    return [prompts[key] for key in sorted(prompts)], sorted(judges)


def judge_models(judge_id: str) -> list[str] | None:
    """The models of an LLM judge id, in order: `openai:M` -> [M]; an ensemble's members; a
    verified judgment's first judge. None for a judge with no model (the lexical judge)."""
    first = judge_id.split("+verify:", 1)[0]
    if first.startswith("ensemble(") and first.endswith(")"):
        members = [judge_models(part) for part in first[len("ensemble(") : -1].split(",")]
        if any(m is None for m in members):
            return None
        return [model for m in members if m for model in m]
    if first.startswith("openai:") and len(first) > len("openai:"):
        return [first[len("openai:") :]]
    return None


def version_pairs(store: Store, candidates: Iterable[Candidate]) -> list[VersionPair]:
    """Each candidate with its old judgment and its new one as stored now (or None)."""
    listed = list(candidates)
    stored = store.get_many(c.new_key for c in listed)
    out: list[VersionPair] = []
    for c in listed:
        new = stored.get(c.new_key)
        if new is not None:
            new = for_pair(new, Pair(c.query, c.doc))
        out.append(VersionPair(c.query.query_id, c.doc.doc_id, c.old, new))
    return out


def distinct_keys(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The first candidate of each new key: what is sent (one request per content)."""
    first: dict[str, Candidate] = {}
    for c in candidates:
        first.setdefault(c.new_key, c)
    return list(first.values())
