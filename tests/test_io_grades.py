"""Human and LLM grade tables: CSV, qrels and judgments, with the worked failure cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from grader.errors import InputError
from grader.io.grades import read_human_grades, read_llm_grades
from grader.models import Judgment, JudgmentError
from tests.helpers.fill_data import DATA as SHARED_DL2019
from tests.helpers.judgments import write_judgments


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def judgment(qid: str, did: str, grade: int | None, judge: str = "openai:m", **kw: Any) -> Judgment:
    if grade is None:
        return Judgment(
            query_id=qid,
            doc_id=did,
            status="failed",
            judge=judge,
            key="sha256:k",
            error=JudgmentError(type="Timeout", message="no reply"),
        )
    return Judgment(
        query_id=qid,
        doc_id=did,
        grade=grade,
        status="ok",
        judge=judge,
        key="sha256:k",
        **kw,
    )


# --- human grades --------------------------------------------------------------------------


def test_csv_with_extra_columns_and_aliases(tmp_path: Path) -> None:
    p = write(
        tmp_path / "human.csv",
        "QID,DocID,Grade,annotator,seconds,note\n"
        '1,a,3,ann,12.5,"exact, the target"\n'
        "1,b,0,bob,4,\n"
        '2,a,2,ann,7,"spans\ntwo lines"\n',
    )
    frame = read_human_grades(p)
    assert list(frame.columns) == ["query_id", "doc_id", "grade", "annotator", "seconds", "note"]
    assert frame["grade"].tolist() == [3, 0, 2]
    assert frame["grade"].dtype == "int64"
    assert frame["seconds"].tolist() == [12.5, 4.0, 7.0]
    assert frame["note"].tolist()[0] == "exact, the target"
    assert frame["note"].tolist()[2] == "spans\ntwo lines"
    assert frame.attrs["source"] == "csv"


def test_csv_empty_grade_is_ungraded_not_zero(tmp_path: Path) -> None:
    p = write(tmp_path / "sample.csv", "query_id,doc_id,grade\n1,a,\n1,b,2\n")
    frame = read_human_grades(p)
    assert frame[["doc_id", "grade"]].values.tolist() == [["b", 2]]
    assert frame.attrs["ungraded"] == 1
    p = write(tmp_path / "none.csv", "query_id,doc_id,grade\n1,a,\n")
    with pytest.raises(InputError, match=r"none\.csv: all 1 rows have an empty grade"):
        read_human_grades(p)


def test_csv_out_of_range_names_line_unless_clamped(tmp_path: Path) -> None:
    p = write(tmp_path / "h.csv", "query_id,doc_id,grade\n1,a,2\n1,b,4\n1,c,-1\n")
    with pytest.raises(InputError) as err:
        read_human_grades(p)
    assert "h.csv:3" in str(err.value) and "grade 4 is outside 0..3" in str(err.value)
    assert "clamp=True" in str(err.value)
    frame = read_human_grades(p, clamp=True)
    assert frame["grade"].tolist() == [2, 3, 0]
    assert frame.attrs["clamped"] == 2
    huge = write(tmp_path / "huge.csv", "query_id,doc_id,grade\n1,a,99999999999999999999\n")
    with pytest.raises(InputError, match=r"huge\.csv:2: grade 99999999999999999999 is outside"):
        read_human_grades(huge)
    assert read_human_grades(huge, clamp=True)["grade"].tolist() == [3]


def test_csv_failures_name_file_and_line(tmp_path: Path) -> None:
    cases = {
        "dup.csv": ("query_id,doc_id,grade\n1,a,2\n\n1,a,3\n", r"dup\.csv:4: .*lines 2 and 4"),
        "cols.csv": ("query_id,doc_id,grade\n1,a\n", r"cols\.csv:2: expected 3 columns"),
        "float.csv": ("query_id,doc_id,grade\n1,a,2.5\n", r"float\.csv:2: grade '2\.5' is not an"),
        "word.csv": ("query_id,doc_id,grade\n1,a,high\n", r"word\.csv:2: grade 'high' is not"),
        "head.csv": (
            "query,document,grade\n1,a,1\n",
            r"head\.csv:1: the CSV header lacks query_id",
        ),
        "noid.csv": ("query_id,doc_id,grade\n,a,1\n", r"noid\.csv:2: query_id and doc_id must"),
        "only.csv": ("query_id,doc_id,grade\n", r"only\.csv: no grades in the file"),
        "empty.csv": ("", r"empty\.csv: no grades in the file"),
    }
    for name, (text, pattern) in cases.items():
        with pytest.raises(InputError, match=pattern):
            read_human_grades(write(tmp_path / name, text))


def test_csv_non_utf8(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_bytes(b"query_id,doc_id,grade\n1,caf\xe9,2\n")
    with pytest.raises(InputError, match=r"h\.csv:2: not valid UTF-8"):
        read_human_grades(p)


def test_qrels_detected_by_content_and_gz(tmp_path: Path) -> None:
    p = tmp_path / "human.txt.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("1 0 a 3\n1 0 b 0\n2 0 a 1\n")
    frame = read_human_grades(p)
    assert frame[["query_id", "doc_id", "grade"]].values.tolist() == [
        ["1", "a", 3],
        ["1", "b", 0],
        ["2", "a", 1],
    ]
    assert frame.attrs["source"] == "qrels"


@pytest.mark.parametrize("grade", ["2.0", "2.5", "nan", "0x2", "two"])
def test_qrels_with_a_bad_first_grade_is_read_as_qrels(tmp_path: Path, grade: str) -> None:
    """The qrels reader names the bad grade; no misleading "CSV header lacks ..."."""
    p = write(tmp_path / "h.qrels", f"1 0 a {grade}\n1 0 b 1\n")
    if grade == "2.0":
        assert read_human_grades(p)["grade"].tolist() == [2, 1]
        return
    with pytest.raises(InputError, match=r"h\.qrels:1: grade .* is not an integer"):
        read_human_grades(p)


def test_tsv_header_with_four_columns_is_not_qrels(tmp_path: Path) -> None:
    p = write(tmp_path / "h.tsv", "qid\tdocid\tgrade\tannotator\n1\ta\t2\tann\n")
    frame = read_human_grades(p)
    assert frame[["query_id", "doc_id", "grade"]].values.tolist() == [["1", "a", 2]]
    assert frame["annotator"].tolist() == ["ann"]


def test_qrels_out_of_range_and_duplicate(tmp_path: Path) -> None:
    p = write(tmp_path / "q.qrels", "1 0 a 3\n1 0 b 5\n")
    with pytest.raises(InputError, match=r"q\.qrels:2: grade 5 is outside 0\.\.3"):
        read_human_grades(p)
    assert read_human_grades(p, clamp=True)["grade"].tolist() == [3, 3]
    p = write(tmp_path / "d.qrels", "1 0 a 3\n1 0 a 1\n")
    with pytest.raises(InputError, match=r"d\.qrels.*1.*2"):
        read_human_grades(p)


# --- LLM grades ----------------------------------------------------------------------------


def test_llm_grades_from_judgments_leave_failures_out(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    write_judgments(
        p,
        [
            judgment("1", "a", 3, distribution=[0.0, 0.1, 0.1, 0.8], expected_grade=2.7),
            judgment("1", "b", None),
            judgment("2", "a", 0),
        ],
    )
    frame = read_llm_grades(p)
    assert frame[["query_id", "doc_id", "grade"]].values.tolist() == [["1", "a", 3], ["2", "a", 0]]
    assert frame.attrs["failed"] == 1
    assert frame["confidence"].tolist()[0] == pytest.approx(0.8)
    assert frame["expected_grade"].tolist()[0] == pytest.approx(2.7)
    assert frame["confidence"].isna().tolist() == [False, True]


def test_llm_grades_without_logprobs_have_no_confidence_column(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    write_judgments(p, [judgment("1", "a", 1)])
    frame = read_llm_grades(p)
    assert "confidence" not in frame and "expected_grade" not in frame
    assert frame["judge"].tolist() == ["openai:m"]


def test_llm_grades_all_failed_is_an_error_not_zeros(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    write_judgments(p, [judgment("1", "a", None), judgment("1", "b", None)])
    with pytest.raises(InputError, match=r"all 2 judgments failed"):
        read_llm_grades(p)


def test_llm_grades_duplicate_pair_and_judge_filter(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    write_judgments(p, [judgment("1", "a", 1, judge="A"), judgment("1", "a", 3, judge="B")])
    with pytest.raises(InputError) as err:
        read_llm_grades(p)
    assert "j.jsonl:2" in str(err.value) and "lines 1 and 2" in str(err.value)
    assert "mixes judges 'A' and 'B'" in str(err.value)
    assert read_llm_grades(p, judge="B")["grade"].tolist() == [3]
    with pytest.raises(InputError, match="no judgments by judge 'C'"):
        read_llm_grades(p, judge="C")


def test_llm_grades_count_clamped_judgments_of_the_kept_judge(tmp_path: Path) -> None:
    p = tmp_path / "j.jsonl"
    records = [
        judgment("1", "a", 3, judge="A").model_dump(mode="json") | {"grade": 7},
        judgment("1", "b", 1, judge="A").model_dump(mode="json") | {"grade": -2},
        judgment("1", "a", 3, judge="B").model_dump(mode="json") | {"grade": 9},
        judgment("1", "c", 2, judge="A").model_dump(mode="json"),
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    frame = read_llm_grades(p, clamp=True, judge="A")
    assert frame["grade"].tolist() == [3, 0, 2]
    assert frame.attrs["clamped"] == 2 and frame.attrs["ungraded"] == 0
    assert read_llm_grades(p, clamp=True, judge="B").attrs["clamped"] == 1


def test_llm_grades_from_qrels(tmp_path: Path) -> None:
    p = write(tmp_path / "llm.qrels", "1 0 a 2\n")
    frame = read_llm_grades(p)
    assert frame["grade"].tolist() == [2] and frame.attrs["failed"] == 0


def test_llm_grades_bad_line_and_empty(tmp_path: Path) -> None:
    p = write(tmp_path / "j.jsonl", '{"query_id": "1", "doc_id": "a", "status": "ok"}\n')
    with pytest.raises(InputError, match=r"j\.jsonl:1: not a valid judgment"):
        read_llm_grades(p)
    with pytest.raises(InputError, match=r"e\.jsonl: no grades in the file"):
        read_llm_grades(write(tmp_path / "e.jsonl", "\n"))


DL2019 = SHARED_DL2019


@pytest.mark.skipif(not DL2019.is_dir(), reason="TREC DL 2019 data not present")
def test_real_qrels_and_llm_labels_reproduce_the_reference_kappa() -> None:
    from sklearn.metrics import cohen_kappa_score

    human = read_human_grades(DL2019 / "2019qrels-pass.txt")
    assert len(human) == 9260
    assert human["grade"].value_counts().to_dict() == {0: 5158, 1: 1601, 2: 1804, 3: 697}
    llm = read_llm_grades(DL2019 / "llm-labels" / "dl2019_test_4prompts_llama70b.txt")
    both = human.merge(llm, on=["query_id", "doc_id"], suffixes=("_h", "_l"))
    assert len(both) == 9260
    kappa = cohen_kappa_score(both["grade_h"], both["grade_l"], weights="quadratic")
    assert kappa == pytest.approx(0.4611, abs=5e-5)


def test_tab_separated_grades_with_header(tmp_path: Path) -> None:
    p = write(tmp_path / "h.tsv", "query_id\tdoc_id\tgrade\tnote\n1\ta\t2\tfine, mostly\n")
    frame = read_human_grades(p)
    assert frame[["query_id", "doc_id", "grade", "note"]].values.tolist() == [
        ["1", "a", 2, "fine, mostly"]
    ]
