"""One prompt-sha format (bare hex) for the LLM and lexical judges alike; content keys and the
cache unchanged, and a store holding the old `sha256:`-tagged lexical sha still all cached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

HEX64 = r"[0-9a-f]{64}"


def _store_rows(db: Path) -> dict[str, tuple[str | None, str]]:
    import sqlite3

    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT key, prompt_sha, judgment FROM judgment_rows").fetchall()
    con.close()
    return {key: (sha, judgment) for key, sha, judgment in rows}


@pytest.mark.usefixtures("llm_env")
def test_llm_and_lexical_judgments_record_the_prompt_sha_alike(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    import hashlib
    import re

    from grader.io.judgments import read_judgments
    from grader.keys import content_key
    from grader.prompts import load_prompt

    files = write_grade_files(tmp_path)
    lexical, llm = tmp_path / "lexical.jsonl", tmp_path / "llm.jsonl"
    store = str(tmp_path / "s.db")
    assert (
        main(files.args("--judge", "lexical", "--store", store, "--out", lexical, "--quiet")) == 0
    )
    argv = ["--base-url", fake_server.base_url, "--model", "m", "--prompt", "passage-v1"]
    assert main(files.args(*argv, "--store", store, "--out", llm, "--quiet")) == 0
    shas = {
        j.judge: j.prompt.sha256
        for path in (lexical, llm)
        for j in read_judgments(path)
        if j.prompt is not None
    }
    assert len(shas) == 2 and all(re.fullmatch(HEX64, sha) for sha in shas.values())
    assert {sha for sha, _ in _store_rows(Path(store)).values()} == set(shas.values())
    # The LLM judgment's key is the one stores have always held: the fingerprint hashes the
    # prompt file's bare hex digest (computed here from the file's bytes).
    spec = load_prompt("passage-v1")
    file_hex = hashlib.sha256(Path(spec.source).read_bytes()).hexdigest()
    j = read_judgments(llm)[0]
    fingerprint = {
        "judge": j.judge,
        "model": "m",
        "prompt": file_hex,
        "sampling": spec.sampling(),
    }
    texts = {
        line.split("\t")[0]: line.split("\t")[1] for line in files.queries.read_text().splitlines()
    }
    docs = {json.loads(x)["doc_id"]: json.loads(x) for x in files.docs.read_text().splitlines()}
    assert shas[j.judge] == file_hex
    assert j.key == content_key(fingerprint, texts[j.query_id], docs[j.doc_id]["text"])


def test_a_store_with_the_old_tagged_lexical_sha_is_still_all_cached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.io.judgments import read_judgments
    from tests.helpers.old_stores import Row, write_old_store

    files = write_grade_files(tmp_path)
    new, db = tmp_path / "new.db", tmp_path / "s.db"
    out = tmp_path / "j.jsonl"
    assert main(files.args("--judge", "lexical", "--store", new, "--quiet")) == 0
    before = _store_rows(new)

    def tagged(row: Row) -> Row:
        """The row as the lexical judge wrote it before: `sha256:<hex>` in both places."""
        sha = row[7]
        old = json.loads(row[12])
        old["prompt"]["sha256"] = f"sha256:{sha}"
        return (*row[:7], f"sha256:{sha}", *row[8:12], json.dumps(old))

    write_old_store(db, 7, new, edit=tagged)
    capsys.readouterr()
    assert main(files.args("--judge", "lexical", "--store", db, "--out", out, "--quiet")) == 0
    assert f"graded 0, cached {files.n_pairs}, failed 0" in capsys.readouterr().err
    assert set(_store_rows(db)) == set(before)  # same content keys, no new rows
    fresh = {j.key: j.prompt.sha256 for j in read_judgments(out) if j.prompt is not None}
    assert fresh == {key: sha for key, (sha, _) in before.items()}  # read back as bare hex
