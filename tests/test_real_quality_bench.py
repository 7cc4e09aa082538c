"""bench/real_quality.py's parts: the GGUF header reader and the model check (a file is the model
its metadata names, of its size and sha256), the stratified DL 2019 pairs (fixed by the seed, a
smaller set a prefix of a larger one) and the figures, whose kappas relgrade's `calibrate` gives
and scikit-learn confirms (the published label set's kappa over every pair is the data README's)."""

from __future__ import annotations

import hashlib
import importlib
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score

from tests.helpers.fill_data import DATA

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _bench(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)  # bench/ modules import each other by bare name


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _gguf(path: Path, name: str) -> Path:
    """A GGUF header: general.name (string), a u32, and an array of strings read past."""
    kv = [
        _string("general.name") + struct.pack("<I", 8) + _string(name),
        _string("general.quantization_version") + struct.pack("<II", 4, 2),
        _string("tokenizer.tokens") + struct.pack("<IIQ", 9, 8, 2) + _string("a") + _string("b"),
        _string("general.size_label") + struct.pack("<I", 8) + _string("135M"),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
    return path


def test_gguf_metadata_and_the_model_check(tmp_path: Path) -> None:
    models = _bench("real_models")
    path = _gguf(tmp_path / "m.gguf", "Smollm2 135M 8k")
    meta = models.gguf_metadata(path)
    assert meta == {
        "general.name": "Smollm2 135M 8k",
        "general.quantization_version": 2,
        "general.size_label": "135M",
    }
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    size = path.stat().st_size
    good = models.Model("m", ("x==1",), ".gguf", size, digest, "smollm2 135m")
    models.check(good, path)
    for wrong, said in (
        ({"size": size + 1}, "bytes"),
        ({"sha256": "0" * 64}, "sha256"),
        ({"general_name": "qwen2.5 coder 0.5b"}, "general.name"),
    ):
        fields: dict[str, Any] = {**good.__dict__, **wrong}
        with pytest.raises(SystemExit, match=said):
            models.check(models.Model(**fields), path)
    (tmp_path / "x.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(SystemExit, match="not a GGUF"):
        models.gguf_metadata(tmp_path / "x.gguf")


needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="TREC DL 2019 data absent")


@needs_data
def test_pairs_are_stratified_short_fixed_and_nested(tmp_path: Path) -> None:
    data = _bench("real_quality_data")
    big = data.load_pairs(DATA, 40, 0, tmp_path)
    small = data.load_pairs(DATA, 8, 0, tmp_path)
    assert small.order == big.order[:8]
    assert big.human_grades()[:8] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert sorted(big.human_grades()) == sorted([0, 1, 2, 3] * 10)
    assert data.load_pairs(DATA, 40, 0, tmp_path).order == big.order
    assert data.load_pairs(DATA, 40, 1, tmp_path).order != big.order
    docs = {line for line in big.docs.read_text().splitlines()}
    assert len(docs) == len({d for _, d in big.order})
    assert all(len(line) < data.MAX_CHARS + 100 for line in docs)
    run = big.run_of_first(8).read_text().splitlines()
    assert [tuple(line.split()[0:3:2]) for line in run] == small.order


@needs_data
def test_figures_are_calibrates_and_scikit_learns(tmp_path: Path) -> None:
    data, stats = _bench("real_quality_data"), _bench("real_quality_stats")
    pairs = data.load_pairs(DATA, 160, 0, tmp_path)
    for name, grades in data.published_label_sets(DATA, pairs):
        fig = stats.figures(name, grades, pairs.human)
        keys = sorted(grades)
        h, m = [pairs.human[k] for k in keys], [grades[k] for k in keys]
        assert fig.n == len(keys) == 160
        assert fig.kappa == pytest.approx(cohen_kappa_score(h, m), abs=1e-12)
        assert sum(map(sum, fig.confusion)) == 160 and sum(fig.grades) == 160
    # over every pair, the README's figure for this label set
    every = {(q, d): g for q, d, g in data._qrels(DATA / "2019qrels-pass.txt")}
    flan = {
        (q, d): g
        for q, d, g in data._qrels(DATA / "llm-labels" / "dl2019_test_4prompts_flant5large.txt")
    }
    fig = stats.figures("flan", flan, every)
    assert round(fig.kappa, 4) == 0.2272 and round(fig.quadratic, 4) == 0.4477
