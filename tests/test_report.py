"""The HTML report: self-contained, with its pictures and numbers; opened in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from calibration.report.html import render_report, write_report
from calibration.summary import summarize
from calibration.summary_model import CalibrationSummary
from tests.helpers.chromium import chromium, needs_chromium


def _summary(with_systems: bool = True) -> CalibrationSummary:
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = []
    for q in range(10):
        for d in range(20):
            h = int(rng.integers(0, 4))
            rows.append((f"q{q}", f"d{q}_{d}", h, int(np.clip(h + rng.integers(-1, 2), 0, 3))))
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "human", "llm"])
    human = frame.rename(columns={"human": "grade"})[["query_id", "doc_id", "grade"]]
    llm = frame.rename(columns={"llm": "grade"})[["query_id", "doc_id", "grade"]]
    lengths = {d: 50 + 10 * i for i, d in enumerate(frame["doc_id"])}
    runs = {}
    if with_systems:
        for name, noise in (("bm25", 1.0), ("dense", 0.5), ("rand", 5.0)):
            run = frame[["query_id", "doc_id"]].copy()
            run["score"] = frame["human"] + rng.normal(0, noise, len(frame))
            run["rank"] = run.groupby("query_id")["score"].rank(ascending=False, method="first")
            runs[name] = run.astype({"rank": int})
    return summarize(llm, human, runs=runs, doc_lengths=lengths, n_bootstrap=200)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[CalibrationSummary, Path]:
    """One summary and its report file, shared by the tests of this module (drawing is slow)."""
    s = _summary()
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_report(path, s)
    return s, path


@pytest.mark.slow
def test_report_is_self_contained_with_pictures_and_numbers(
    written: tuple[CalibrationSummary, Path],
) -> None:
    s, path = written
    text = path.read_text()
    assert text.count("<svg") == 5  # confusion, distributions, length bias, rank bias, systems
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "<link" not in text and "@import" not in text
    assert f'<span id="cohen_kappa">{s["cohen_kappa"]:.4f}</span>' in text
    assert "Kendall tau" in text


@pytest.mark.slow  # test_report_templates escapes in the quick loop
def test_report_escapes_names() -> None:
    s = _summary(with_systems=False)
    s["per_query"][0]["query_id"] = "<script>alert(1)</script>"
    text = render_report(s)
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_report_renders_in_headless_chromium(written: tuple[CalibrationSummary, Path]) -> None:
    s, path = written
    requests: list[str] = []
    with chromium() as browser:
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        charts = page.locator("figure svg")
        assert charts.count() == 5
        for i in range(charts.count()):
            box = charts.nth(i).bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 100
        assert page.locator("#confusion-chart svg text").count() >= 16  # counts in cells
        assert page.locator("#cohen_kappa").inner_text() == f"{s['cohen_kappa']:.4f}"
        assert page.locator("#kendall_tau").inner_text() == f"{s['systems']['kendall_tau']:.4f}"
        assert page.locator("#systems tbody tr").count() == 3
        assert "LLM judge is" in page.locator("#verdict").inner_text()
        confusion_cells = page.locator("#confusion tbody tr").first.locator("td")
        assert confusion_cells.nth(1).inner_text() == str(s["confusion"][0][0])
    assert requests == [path.as_uri()]  # nothing fetched from anywhere else


def _patches(svg: str) -> int:
    return len(re.findall(r'<g id="patch_\d+"', svg))


@pytest.mark.slow
def test_an_undefined_bias_or_share_gets_no_bar_and_an_n_a_label() -> None:
    from calibration.report.plots import bias_svg, distributions_svg

    rows = [{"bucket": "Q1", "mean_bias": 0.5}, {"bucket": "Q2", "mean_bias": -0.25}]
    zero = bias_svg([*rows, {"bucket": "Q3", "mean_bias": 0.0}], "x", "t")
    undefined = bias_svg([*rows, {"bucket": "Q3", "mean_bias": None}], "x", "t")
    assert _patches(undefined) == _patches(zero) - 1
    assert "n/a" in undefined and "n/a" not in zero
    shares = {"grades": [0, 1, 2, 3], "human": [0.1, 0.2, 0.3, 0.4], "llm": [0.25] * 4}
    full = distributions_svg(shares)
    partial = distributions_svg({**shares, "llm": [0.5, 0.5, None, 0.0]})
    assert _patches(partial) == _patches(full) - 1
    assert "n/a" in partial and "n/a" not in full


def _points(svg: str) -> int:
    group = re.search(r'<g id="PathCollection_1">(.*?)</g>', svg, flags=re.DOTALL)
    return group.group(1).count("<use ") if group else 0


def test_a_run_with_an_undefined_score_is_not_plotted_at_0() -> None:
    from calibration.report.plots import systems_svg

    runs = [{"run": "bm25", "human": 0.4, "llm": 0.5}, {"run": "dense", "human": 0.6, "llm": 0.7}]
    full = systems_svg([*runs, {"run": "rand", "human": 0.0, "llm": 0.0}], "nDCG@10")
    missing = systems_svg([*runs, {"run": "rand", "human": None, "llm": 0.1}], "nDCG@10")
    assert _points(full) == 3 and _points(missing) == 2
    assert "n/a (not plotted): rand" in missing and "n/a" not in full
