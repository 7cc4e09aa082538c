"""Readers of query and document files: both formats, .gz, and every worked failure case."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from grader.errors import InputError
from grader.io.docs import read_docs, read_queries
from grader.models import Doc
from tests.helpers.fill_data import DATA as SHARED_DL2019


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- queries -------------------------------------------------------------------------------


def test_queries_tsv_in_file_order_with_header_and_blank_lines(tmp_path: Path) -> None:
    p = write(
        tmp_path / "q.tsv",
        "qid\ttext\n\n19335\tanthropological definition of environment\n47923\taxon terminals\r\n",
    )
    queries = read_queries(p)
    assert list(queries) == ["19335", "47923"]
    assert queries["47923"].text == "axon terminals"


def test_queries_jsonl_accepts_each_field_alias(tmp_path: Path) -> None:
    lines = [
        {"query_id": "a", "text": "first"},
        {"qid": "b", "query": "second"},
        {"id": 7, "text": "third"},
    ]
    p = write(tmp_path / "q.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    queries = read_queries(p)
    assert {k: q.text for k, q in queries.items()} == {"a": "first", "b": "second", "7": "third"}


def test_queries_gz(tmp_path: Path) -> None:
    p = tmp_path / "q.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write("1\tretry with backoff\n")
    assert read_queries(p)["1"].text == "retry with backoff"


def test_queries_duplicate_names_both_lines(tmp_path: Path) -> None:
    p = write(tmp_path / "q.tsv", "1\ta\n2\tb\n1\tc\n")
    with pytest.raises(InputError) as err:
        read_queries(p)
    message = str(err.value)
    assert "q.tsv:3" in message and "lines 1 and 3" in message and "'1'" in message


def test_queries_wrong_column_count_names_line(tmp_path: Path) -> None:
    p = write(tmp_path / "q.tsv", "1\ta\n2 no tab here\n")
    with pytest.raises(InputError, match=r"q\.tsv:2: expected 2 tab-separated columns"):
        read_queries(p)


def test_queries_jsonl_bad_json_and_missing_field(tmp_path: Path) -> None:
    p = write(tmp_path / "q.jsonl", '{"qid": "1", "text": "a"}\n{"qid": "2", "text": \n')
    with pytest.raises(InputError, match=r"q\.jsonl:2: not valid JSON"):
        read_queries(p)
    p = write(tmp_path / "q2.jsonl", '{"qid": "1", "body": "a"}\n')
    with pytest.raises(InputError, match=r'q2\.jsonl:1: no query text field.*"text", "query"'):
        read_queries(p)
    p = write(tmp_path / "q3.jsonl", '{"qid": [1], "text": "a"}\n')
    with pytest.raises(InputError, match=r"q3\.jsonl:1: query id must be a string or an integer"):
        read_queries(p)
    p = write(tmp_path / "q4.jsonl", '{"qid": "1", "text": "a"}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"q4\.jsonl:2: expected a JSON object, found list"):
        read_queries(p)


def test_queries_empty_text_empty_file_and_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"q\.tsv:1: query '1' has an empty text"):
        read_queries(write(tmp_path / "q.tsv", "1\t  \n"))
    with pytest.raises(InputError, match=r"empty\.tsv: no queries in the file"):
        read_queries(write(tmp_path / "empty.tsv", "\n\n"))
    bad = tmp_path / "latin.tsv"
    bad.write_bytes(b"1\tok\n2\tcaf\xe9\n")
    with pytest.raises(InputError, match=r"latin\.tsv:2: not valid UTF-8"):
        read_queries(bad)


def test_queries_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_queries(tmp_path / "nope.tsv")


# --- docs ----------------------------------------------------------------------------------


def test_docs_jsonl_keeps_extra_fields_as_metadata(tmp_path: Path) -> None:
    line = {
        "doc_id": "pkg/retry.py::backoff",
        "text": "def backoff(): ...",
        "path": "pkg/retry.py",
        "symbol": "backoff",
        "language": "python",
    }
    p = write(tmp_path / "d.jsonl", json.dumps(line) + "\n")
    doc = read_docs(p)["pkg/retry.py::backoff"]
    assert doc.text == "def backoff(): ..."
    assert doc.title is None
    assert doc.metadata == {"path": "pkg/retry.py", "symbol": "backoff", "language": "python"}


def test_docs_jsonl_aliases_title_and_round_trip_of_model_dump(tmp_path: Path) -> None:
    original = Doc(doc_id="d1", text="body", title="T", metadata={"url": "http://x"})
    lines = [
        original.model_dump_json(),
        json.dumps({"docid": "d2", "contents": "c2", "title": None}),
        json.dumps({"id": 3, "doc": "c3"}),
    ]
    docs = read_docs(write(tmp_path / "d.jsonl", "\n".join(lines)))
    assert docs["d1"] == original
    assert docs["d2"].text == "c2" and docs["d2"].title is None
    assert docs["3"].text == "c3"


def test_docs_tsv_two_and_three_columns(tmp_path: Path) -> None:
    two = read_docs(write(tmp_path / "two.tsv", "0\tThe presence of communication\n1\tsecond\n"))
    assert two["0"].text == "The presence of communication" and two["0"].title is None
    three = read_docs(
        write(tmp_path / "three.tsv", "docid\ttitle\ttext\nD1\tA title\tthe text\nD2\t\tno title\n")
    )
    assert list(three) == ["D1", "D2"]
    assert three["D1"].title == "A title" and three["D1"].text == "the text"
    assert three["D2"].title is None


def test_docs_tsv_column_count_must_stay_as_first_line(tmp_path: Path) -> None:
    p = write(tmp_path / "d.tsv", "1\tt\tx\n2\ttext with\ta tab\tinside\n")
    with pytest.raises(InputError, match=r"d\.tsv:2: expected 3 tab-separated columns"):
        read_docs(p)
    p = write(tmp_path / "one.tsv", "just-an-id\n")
    with pytest.raises(InputError, match=r"one\.tsv:1: expected 2 \(docid, text\) or 3"):
        read_docs(p)


def test_docs_filter_by_ids(tmp_path: Path) -> None:
    p = write(tmp_path / "d.tsv", "a\tx\nb\ty\nc\tz\na\tagain\n")
    assert list(read_docs(p, ids={"b", "c"})) == ["b", "c"]
    with pytest.raises(InputError, match=r"d\.tsv:4: doc id 'a' appears twice, on lines 1 and 4"):
        read_docs(p)


def test_docs_jsonl_errors_name_file_and_line(tmp_path: Path) -> None:
    p = write(tmp_path / "d.jsonl", '{"doc_id": "a", "text": "x"}\n{"doc_id": "b"}\n')
    with pytest.raises(InputError, match=r"d\.jsonl:2: no document text field"):
        read_docs(p)
    p = write(tmp_path / "e.jsonl", '{"doc_id": "a", "text": 5}\n')
    with pytest.raises(InputError, match=r"e\.jsonl:1: document text must be a string, found int"):
        read_docs(p)
    p = write(tmp_path / "f.jsonl", '{"doc_id": "a", "text": "x", "metadata": 3}\n')
    with pytest.raises(InputError, match=r'f\.jsonl:1: "metadata" must be an object'):
        read_docs(p)
    p = write(
        tmp_path / "g.jsonl", '{"doc_id": "a", "text": "x"}\n\n{"doc_id": "a", "text": "y"}\n'
    )
    with pytest.raises(InputError, match=r"g\.jsonl:3: doc id 'a' appears twice, on lines 1 and 3"):
        read_docs(p)


def test_docs_gz_empty_and_non_utf8(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write('{"doc_id": "a", "text": "caf\\u00e9"}\n')
    assert read_docs(p)["a"].text == "café"
    with pytest.raises(InputError, match="no documents in the file"):
        read_docs(write(tmp_path / "empty.jsonl", ""))
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"a\t\xff\xfe\n")
    with pytest.raises(InputError, match=r"bad\.tsv:1: not valid UTF-8"):
        read_docs(bad)


DL2019 = SHARED_DL2019


@pytest.mark.skipif(not DL2019.is_dir(), reason="TREC DL 2019 data not present")
def test_real_queries_and_passages_load() -> None:
    queries = read_queries(DL2019 / "msmarco-test2019-queries.tsv")
    assert len(queries) == 200
    assert all(q.text for q in queries.values())
    docs = read_docs(DL2019 / "dl2019_document.jsonl")  # {"docid", "doc"} aliases
    assert len(docs) == 10818
    assert all(d.text and not d.metadata for d in docs.values())
