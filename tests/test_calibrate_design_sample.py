"""An also-judged manifest beside `--llm`: agreement counts every pair graded by both, the design
figures count the manifest's pairs, and a manifest of another draw is refused (exit 2, or an
InputError in the API)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

import relgrade as rg
from calibration.spotcheck.also_judged import also_judged_manifest, draw_also_judged
from calibration.spotcheck.manifest import copy_manifest_beside
from grader.cli.main import main
from tests.helpers.calibrate_files import (
    Rows,
    calibrate_json,
    noisy_grades,
    write_qrels_rows,
)

DRAWN = 40


def _world(tmp_path: Path, *, seed: int = 0, stratify: bool = False) -> dict[str, object]:
    """Human qrels of 20 x 15 pairs; a third are holes (the LLM grades them, and people graded
    them too in `full.qrels`); DRAWN judged pairs drawn also-judged, the manifest beside the
    LLM qrels."""
    human, llm = noisy_grades(3, n_queries=20, per_query=15)
    rng = np.random.default_rng(7)
    hole = rng.random(len(human)) < 1 / 3
    judged = [(q, d) for (q, d, _), h in zip(human, hole, strict=True) if not h]
    grades = {(q, d): g for q, d, g in human}
    draw = draw_also_judged(judged, grades, n=DRAWN, seed=seed, stratify=stratify)
    drawn = {(p.query_id, p.doc_id) for p in draw.pairs}
    llm_rows: Rows = [
        (q, d, g) for (q, d, g), h in zip(llm, hole, strict=True) if h or (q, d) in drawn
    ]
    kept = [r for r, h in zip(human, hole, strict=True) if not h]
    pool = write_qrels_rows(tmp_path / "pool.qrels", kept)
    full = write_qrels_rows(tmp_path / "full.qrels", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm_rows)
    copy_manifest_beside(also_judged_manifest(draw, pool), lp)
    return {
        "llm": lp,
        "full": full,
        "pool": pool,
        "human": grades,
        "llm_rows": llm_rows,
        "drawn": drawn,
        "judged": judged,
    }


def test_agreement_counts_every_pair_graded_by_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = _world(tmp_path)
    out = calibrate_json(
        capsys, ["--llm", str(w["llm"]), "--human", str(w["full"]), "--bootstrap", "0"]
    )
    rows = w["llm_rows"]
    human = w["human"]
    assert isinstance(rows, list) and isinstance(human, dict)
    h = [human[(q, d)] for q, d, _ in rows]
    m = [g for *_, g in rows]
    assert out["n"] == len(rows) > DRAWN
    assert out["weighted"] is False
    assert out["cohen_kappa"] == pytest.approx(cohen_kappa_score(h, m))
    assert out["counts"]["design_sample"] == DRAWN
    design = out["design_sample"]
    assert design["n"] == DRAWN and design["outside"] == len(rows) - DRAWN
    drawn = w["drawn"]
    assert isinstance(drawn, set)
    hd = [human[(q, d)] for q, d, _ in rows if (q, d) in drawn]
    md = [g for q, d, g in rows if (q, d) in drawn]
    assert design["cohen_kappa"] == pytest.approx(cohen_kappa_score(hd, md))
    assert any("agreement uses all" in n for n in out["notes"])


def test_the_table_says_which_count_is_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = _world(tmp_path)
    assert (
        main(["calibrate", "--llm", str(w["llm"]), "--human", str(w["full"]), "--bootstrap", "0"])
        == 0
    )
    text = " ".join(capsys.readouterr().out.split())
    assert f"design sample: {DRAWN} pairs of the manifest" in text


def test_stratified_draw_weights_the_design_figures_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = _world(tmp_path, stratify=True)
    out = calibrate_json(
        capsys, ["--llm", str(w["llm"]), "--human", str(w["full"]), "--bootstrap", "0"]
    )
    from calibration.spotcheck.manifest import find_manifest, read_manifest

    path = find_manifest(w["llm"])  # type: ignore[arg-type]
    assert path is not None
    probs = read_manifest(path).probabilities()
    rows = w["llm_rows"]
    human = w["human"]
    assert isinstance(rows, list) and isinstance(human, dict)
    inside = [(q, d, g) for q, d, g in rows if (q, d) in probs]
    kappa = cohen_kappa_score(
        [human[(q, d)] for q, d, _ in inside],
        [g for *_, g in inside],
        sample_weight=[1 / probs[(q, d)] for q, d, _ in inside],
    )
    assert out["design_sample"]["cohen_kappa"] == pytest.approx(kappa)
    assert out["design_sample"]["weighted_n"] == pytest.approx(len(w["judged"]))  # type: ignore[arg-type]
    assert out["weighted"] is False


def test_without_extra_pairs_every_figure_is_the_design_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = _world(tmp_path, stratify=True)
    out = calibrate_json(
        capsys, ["--llm", str(w["llm"]), "--human", str(w["pool"]), "--bootstrap", "0"]
    )
    assert out["n"] == out["counts"]["design_sample"] == DRAWN
    assert out["weighted"] is True
    assert out["design_sample"]["outside"] == 0
    assert out["design_sample"]["cohen_kappa"] == pytest.approx(out["cohen_kappa"])


def _foreign(tmp_path: Path) -> Path:
    """The LLM grades of seed 0's draw beside the manifest of seed 1's draw."""
    (tmp_path / "other").mkdir()
    _world(tmp_path / "other", seed=1)
    _world(tmp_path, seed=0)
    target = tmp_path / "llm.manifest.json"
    target.write_bytes((tmp_path / "other" / "llm.manifest.json").read_bytes())
    return target


def test_a_manifest_of_another_draw_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _foreign(tmp_path)
    code = main(
        [
            "calibrate",
            "--llm",
            str(tmp_path / "llm.qrels"),
            "--human",
            str(tmp_path / "full.qrels"),
            "--format",
            "json",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "does not belong to these LLM grades" in err
    assert "llm.manifest.json" in err


def test_the_api_refuses_it_too(tmp_path: Path) -> None:
    _foreign(tmp_path)
    with pytest.raises(rg.InputError, match="does not belong"):
        rg.calibrate(tmp_path / "llm.qrels", tmp_path / "full.qrels", bootstrap=0)
    # --no-manifest: the grades alone, unweighted
    result = rg.calibrate(
        tmp_path / "llm.qrels", tmp_path / "full.qrels", bootstrap=0, no_manifest=True
    )
    assert "design_sample" not in result.to_dict()


def test_drawn_pairs_the_llm_failed_on_are_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judgments JSONL records its failures: that many drawn pairs without an LLM grade are
    failures, not another draw; a qrels file without those pairs records none, and is refused."""
    from grader.models import Judgment, JudgmentError
    from tests.helpers.judgments import write_judgments

    w = _world(tmp_path)
    rows, drawn = w["llm_rows"], w["drawn"]
    assert isinstance(rows, list) and isinstance(drawn, set)
    lost = sorted(drawn)[:2]
    lines = [
        Judgment(
            query_id=q,
            doc_id=d,
            status="failed",
            judge="m",
            key=f"k{i}",
            error=JudgmentError(type="InvalidReply", message="no grade"),
        )
        if (q, d) in lost
        else Judgment(query_id=q, doc_id=d, grade=g, status="ok", judge="m", key=f"k{i}")
        for i, (q, d, g) in enumerate(rows)
    ]
    jsonl = tmp_path / "llm.jsonl"
    write_judgments(jsonl, lines)
    # llm.jsonl and llm.qrels share the stem: the manifest beside both is the draw's
    out = calibrate_json(
        capsys, ["--llm", str(jsonl), "--human", str(w["full"]), "--bootstrap", "0"]
    )
    assert out["counts"]["design_sample"] == DRAWN - 2
    kept = [r for r in rows if (r[0], r[1]) not in lost]
    write_qrels_rows(Path(str(w["llm"])), kept)
    code = main(["calibrate", "--llm", str(w["llm"]), "--human", str(w["full"])])
    assert code == 2
    assert "2 of its 40 drawn pairs have no LLM grade" in capsys.readouterr().err


def test_the_report_says_it_too(tmp_path: Path) -> None:
    w = _world(tmp_path)
    page = rg.calibrate(w["llm"], w["full"], bootstrap=0)._repr_html_()
    assert f"Design sample: {DRAWN} pairs of the manifest" in page
    assert "Every figure is weighted" not in page
