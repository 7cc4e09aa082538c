"""One query order: `calibrate` (JSON and report) and `evaluate` list numeric query ids by number,
any other ids by text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.helpers.calibrate_files import Rows, calibrate_json, write_qrels_rows


def _report_query_ids(path: Path) -> list[str]:
    """The first cell of each row of the report's per-query table, in page order."""
    from html.parser import HTMLParser

    class PerQuery(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.inside = self.first = False
            self.cell = 0
            self.ids: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "table":
                self.inside = ("id", "per-query") in attrs
            elif self.inside and tag == "tr":
                self.cell = 0
            elif self.inside and tag == "td":
                self.cell += 1
                self.first = self.cell == 1

        def handle_endtag(self, tag: str) -> None:
            if tag == "table":
                self.inside = False
            if tag == "td":
                self.first = False

        def handle_data(self, data: str) -> None:
            if self.inside and self.first:
                self.ids.append(data)

    parser = PerQuery()
    parser.feed(path.read_text())
    return parser.ids


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ids", "expected"),
    [(["100", "2", "10"], ["2", "10", "100"]), (["q2", "q100", "q10"], ["q10", "q100", "q2"])],
)
def test_report_and_evaluate_list_queries_in_one_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ids: list[str], expected: list[str]
) -> None:
    human: Rows = [(q, f"d{i}", i % 4) for q in ids for i in range(4)]
    llm: Rows = [(q, d, (g + 1) % 4) for q, d, g in human]
    hp = write_qrels_rows(tmp_path / "human.qrels", human)  # file order: 100, 2, 10
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    report = tmp_path / "report.html"
    argv = ["--llm", str(lp), "--human", str(hp), "--bootstrap", "0", "--report", str(report)]
    out = calibrate_json(capsys, argv)
    assert [q["query_id"] for q in out["per_query"]] == expected
    assert _report_query_ids(report) == expected
    run = tmp_path / "run.txt"
    run.write_text("".join(f"{q} Q0 {d} 1 {9 - int(d[1:])} r\n" for q, d, _ in reversed(human)))
    assert main(["evaluate", str(hp), str(run), "-m", "RR", "--per-query", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["query_id"] for r in records if r["query_id"] != "all"] == expected


def test_query_order_is_numeric_only_when_every_id_is_a_whole_number() -> None:
    from grader.metrics.rank_order import query_order

    def sort_query_ids(ids: list[str]) -> list[str]:
        return [ids[i] for i in query_order(ids)]

    assert sort_query_ids(["100", "2", "10"]) == ["2", "10", "100"]
    assert sort_query_ids(["100", "2", "10", "x"]) == ["10", "100", "2", "x"]
    assert sort_query_ids(["01", "1", "002"]) == ["01", "1", "002"]  # equal numbers: by text
    assert sort_query_ids(["-1", "2"]) == ["-1", "2"]  # a sign is not a whole number: text
