"""Label Studio exports as a real server writes them, imported through `relgrade sample --import`.

The files in tests/fixtures/labelstudio/ were exported by Label Studio 1.23.2 (JSON, JSON_MIN,
CSV and TSV; `-all` with download_all_tasks=true) from a project made with relgrade's labeling
config, six tasks and these annotations posted through its API (user 1 and user 2; completed_by
exported as a number):

    q1/d1  user 1: 2
    q1/d2  user 1: 0, user 2: 1          (two people)
    q1/d3  user 1: 1, then user 1: 3     (one person twice: the latest counts)
    q2/d1  user 1: skipped (was_cancelled)
    q2/d2  nobody                         (only in the -all exports)
    q2/d3  user 2: 3

The manifest beside them is a uniform sample of those six pairs.
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.helpers.sampling import population

FIXTURES = Path(__file__).parent / "fixtures" / "labelstudio"
MANIFEST = FIXTURES / "sample.manifest.json"
EXPORTS = [
    "export.json",
    "export-all.json",
    "export.min.json",
    "export-all.min.json",
    "export.csv",
    "export-all.csv",
    "export.tsv",
]
FORMAT = {
    "export.json": "JSON",
    "export-all.json": "JSON",
    "export.min.json": "JSON-MIN",
    "export-all.min.json": "JSON-MIN",
    "export.csv": "CSV",
    "export-all.csv": "CSV",
    "export.tsv": "TSV",
}


def _import(
    export: Path, out: Path, *extra: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    capsys.readouterr()
    argv = ["sample", "--import", str(export), "--manifest", str(MANIFEST), "--out", str(out)]
    code = main([*argv, *extra])
    said = capsys.readouterr()
    return code, said.out, said.err


def _grades(path: Path) -> dict[tuple[str, str], tuple[int, str]]:
    with path.open(newline="") as fh:
        return {
            (r["query_id"], r["doc_id"]): (int(r["grade"]), r["annotator"])
            for r in csv.DictReader(fh)
        }


@pytest.mark.parametrize("name", EXPORTS)
def test_two_people_on_one_pair_need_annotator_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, _, err = _import(FIXTURES / name, tmp_path / "h.csv", capsys=capsys)
    assert code == 2
    assert "1 pair(s) were graded by more than one person, e.g. (q1, d2) by 1, 2" in err
    assert "annotators: 1 (3 pairs), 2 (2 pairs)" in err
    assert "--annotator" in err
    assert not (tmp_path / "h.csv").exists()


@pytest.mark.parametrize("name", EXPORTS)
def test_one_persons_grades_come_back_the_same_from_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    human = tmp_path / "human.csv"
    code, out, err = _import(
        FIXTURES / name, human, "--annotator", "1", "--allow-missing", capsys=capsys
    )
    assert code == 0, err
    assert _grades(human) == {
        ("q1", "d1"): (2, "1"),
        ("q1", "d2"): (0, "1"),
        ("q1", "d3"): (3, "1"),
    }
    assert f"from Label Studio's {FORMAT[name]} export, annotator 1 (of 2 in it)" in out
    if FORMAT[name] == "JSON":
        assert "graded 3, skipped 1, missing 2 of the 6 sampled pairs" in out
    else:
        assert "graded 3, missing or skipped 3 of the 6 sampled pairs" in out
        assert "leave skipped tasks out" in err
    assert "1 pair(s) were graded more than once by the same person; the latest" in err
    assert (tmp_path / "human.manifest.json").is_file()

    other = tmp_path / "bob.csv"
    code, out, _ = _import(
        FIXTURES / name, other, "--annotator", "2", "--allow-missing", capsys=capsys
    )
    assert code == 0
    assert _grades(other) == {("q1", "d2"): (1, "2"), ("q2", "d3"): (3, "2")}
    counts = "graded 2, skipped 0, missing 4" if FORMAT[name] == "JSON" else "graded 2, missing"
    assert counts in out


@pytest.mark.parametrize("name", ["export.json", "export.min.json", "export.csv"])
def test_ungraded_sampled_pairs_are_counted_and_need_allow_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, _, err = _import(FIXTURES / name, tmp_path / "h.csv", "--annotator", "1", capsys=capsys)
    assert code == 2
    assert "3 sampled pair(s) have no grade from annotator 1: graded 3, " in err
    assert "--allow-missing" in err
    assert not (tmp_path / "h.csv").exists()


def test_an_unknown_annotator_lists_the_people_of_the_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _import(
        FIXTURES / "export.json", tmp_path / "h.csv", "--annotator", "ann@example.org",
        capsys=capsys,
    )  # fmt: skip
    assert code == 2
    assert "no annotation by 'ann@example.org' in this export; its annotators: 1 (3 pairs)" in err
    assert "user id" in err


def test_annotator_matches_an_email_where_the_export_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Older versions export completed_by as {id, email} (JSON) and the email as annotator
    (JSON-MIN, CSV): the email finds the person, and in JSON ties their bare ids to it."""
    tasks = json.loads((FIXTURES / "export.json").read_text())
    tasks[0]["annotations"][0]["completed_by"] = {"id": 1, "email": "relgrade@example.org"}
    full = tmp_path / "emails.json"
    full.write_text(json.dumps(tasks))
    code, _, err = _import(
        full, tmp_path / "a.csv", "--annotator", "Relgrade@example.org", "--allow-missing",
        capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert {k: g for k, (g, _) in _grades(tmp_path / "a.csv").items()} == {
        ("q1", "d1"): 2,
        ("q1", "d2"): 0,
        ("q1", "d3"): 3,
    }
    records = json.loads((FIXTURES / "export.min.json").read_text())
    for r in records:
        r["annotator"] = {1: "relgrade@example.org", 2: "bob@example.org"}[r["annotator"]]
    flat = tmp_path / "emails.min.json"
    flat.write_text(json.dumps(records))
    code, _, err = _import(
        flat, tmp_path / "b.csv", "--annotator", "bob@example.org", "--allow-missing",
        capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    assert _grades(tmp_path / "b.csv") == {
        ("q1", "d2"): (1, "bob@example.org"),
        ("q2", "d3"): (3, "bob@example.org"),
    }


def test_help_says_annotator_takes_ids_and_emails(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--annotator ID|EMAIL" in text
    assert "matches the user id (a number" in text and "or the email" in text
    assert "JSON, JSON-MIN, CSV or TSV" in text


def test_a_filled_blind_csv_reports_graded_and_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled = tmp_path / "filled.csv"
    filled.write_text("query_id,doc_id,grade\nq1,d1,2\nq1,d2,\nq2,d3,1\n")
    code, out, _ = _import(filled, tmp_path / "h.csv", "--allow-missing", capsys=capsys)
    assert code == 0
    assert "from the filled sample" in out
    assert "graded 2, missing 4 of the 6 sampled pairs" in out


def _sample_with_tasks(tmp_path: Path, *extra: str) -> ET.Element:
    from tests.helpers.judgments import write_judgments

    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, population({0: 8, 1: 4, 2: 4, 3: 4}, queries=2))
    argv = ["sample", "--judgments", str(judgments), "--n", "8", "--strategy", "uniform"]
    argv += ["--out", str(tmp_path / "s.csv"), "--labelstudio", str(tmp_path / "tasks.json")]
    assert main([*argv, *extra]) == 0
    return ET.fromstring((tmp_path / "tasks.config.xml").read_text())


def test_labeling_config_hotkeys_are_the_grades_and_documents_keep_their_spaces(
    tmp_path: Path,
) -> None:
    root = _sample_with_tasks(tmp_path, "--prompt", "code")
    choices = root.find("Choices")
    assert choices is not None
    assert [(c.get("value"), c.get("hotkey")) for c in choices] == [
        (str(g), str(g)) for g in range(4)
    ]
    style = root.find("Style")
    assert style is not None and "white-space: pre-wrap" in (style.text or "")
    legend = [h.get("value") or "" for h in root.iter("Header") if h.get("value") != "$query"]
    assert [v.split(":")[0] for v in legend] == ["0", "1", "2", "3"]
    assert legend[3].startswith("3: Exact target")
    assert (choices[3].get("hint") or "").startswith("Exact target")


def test_labeling_config_without_a_scale_has_hotkeys_and_no_legend(tmp_path: Path) -> None:
    root = _sample_with_tasks(tmp_path)  # the judgments name no prompt
    choices = root.find("Choices")
    assert choices is not None
    assert [c.get("hotkey") for c in choices] == ["0", "1", "2", "3"]
    assert all(c.get("hint") is None for c in choices)
    assert [h.get("value") for h in root.iter("Header")] == ["$query"]
