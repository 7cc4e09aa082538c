"""The manifest beside a spot-check sample (`SAMPLE.manifest.json`): how it was drawn and each
pair's inclusion probability, copied beside imported grades for `calibrate`'s 1/pi weights.
It is for calibration, never for graders."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calibration.join import pair_keys
from calibration.spotcheck.sampling import SampleDraw
from grader.errors import InputError
from grader.io.files import atomic_write, read_text

MANIFEST_SUFFIX = ".manifest.json"


class SourceFile(BaseModel):
    """The judgments file a sample was drawn from, and its sha256 at drawing time."""

    path: str
    sha256: str


class ManifestPair(BaseModel):
    """One sampled pair with its inclusion probability (> 0, so 1/pi is its weight)."""

    model_config = ConfigDict(extra="allow")

    query_id: str
    doc_id: str
    inclusion_probability: float = Field(gt=0, le=1)
    stratum: str | None = None
    uncertainty: float | None = None
    draw_probability: float | None = Field(default=None, gt=0, le=1)


class Manifest(BaseModel):
    """How a sample was drawn: strategy, seed, population size, source, and its pairs."""

    model_config = ConfigDict(extra="allow")

    version: int = 1
    strategy: str
    allocation: str | None = None
    seed: int
    population: int = Field(gt=0)
    n: int | None = None
    source: SourceFile | None = None
    prompt: str | None = None
    judge: str | None = None
    excluded: dict[str, int] = Field(default_factory=dict)
    strata: dict[str, dict[str, int | float]] = Field(default_factory=dict)
    uncertainty_source: str | None = None
    uniform_share: float | None = None
    threshold: int | None = None
    variance_factor: float | None = None
    created_at: str | None = None
    pairs: list[ManifestPair]

    def sequential(self) -> bool:
        """True when the pairs are listed in draw order with draw probabilities (uniform and
        active samples): then every prefix is a sample and the confidence sequence applies."""
        return bool(self.pairs) and all(p.draw_probability is not None for p in self.pairs)

    def probabilities(self) -> dict[tuple[str, str], float]:
        """(query_id, doc_id) -> inclusion probability."""
        return {(p.query_id, p.doc_id): p.inclusion_probability for p in self.pairs}


def manifest_path_for(path: str | Path) -> Path:
    """`<folder>/<stem>.manifest.json` for a sample or grades file (`.gz` is looked through)."""
    p = Path(path)
    name = p.name.removesuffix(".gz")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return p.with_name(stem + MANIFEST_SUFFIX)


def find_manifest(grades_path: str | Path) -> Path | None:
    """The manifest beside a grades file, or None when there is none."""
    candidate = manifest_path_for(grades_path)
    return candidate if candidate.is_file() else None


def build_manifest(
    draw: SampleDraw,
    *,
    source: str | Path | None = None,
    prompt: str | None = None,
    judge: str | None = None,
    excluded: dict[str, int] | None = None,
) -> Manifest:
    """The manifest of a draw; `source` (the judgments file) is recorded with its sha256."""
    src = None
    if source is not None:
        with open(source, "rb") as fh:
            sha = "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()
        src = SourceFile(path=str(Path(source).resolve()), sha256=sha)
    copied = "strategy allocation seed population strata uncertainty_source uniform_share"
    copied += " threshold variance_factor"
    return Manifest(
        **{name: getattr(draw, name) for name in copied.split()},
        n=len(draw.pairs),
        source=src,
        prompt=prompt,
        judge=judge,
        excluded=dict(excluded or {}),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        pairs=[ManifestPair(**asdict(p)) for p in draw.pairs],
    )


def write_manifest(path: str | Path, manifest: Manifest) -> None:
    """Write a manifest as indented JSON, atomically."""
    payload: dict[str, Any] = manifest.model_dump(mode="json", exclude_none=True)
    with atomic_write(path) as fh:
        json.dump(payload, fh, indent=1, ensure_ascii=False)
        fh.write("\n")


def read_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest; errors name the file and what is wrong."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON: {exc.msg}", path=path, line=exc.lineno, hint="is it a manifest?"
        ) from None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise InputError(
            f"not a valid sample manifest: {where}: {first['msg']}",
            path=path,
            hint="it is written by `relgrade sample`",
        ) from None
    seen: set[tuple[str, str]] = set()
    for p in manifest.pairs:
        key = (p.query_id, p.doc_id)
        if key in seen:
            raise InputError(f"pair ({p.query_id}, {p.doc_id}) is listed twice", path=path)
        seen.add(key)
    return manifest


def sample_weights(manifest: Manifest, frame: pd.DataFrame) -> np.ndarray:
    """1/pi for each row of `frame` (query_id, doc_id), in row order; a pair the manifest does
    not hold is an error (it was not drawn by this sample)."""
    probs = manifest.probabilities()
    keys = pair_keys(frame)
    missing = [key for key in keys if key not in probs]
    if missing:
        shown = ", ".join(f"({q}, {d})" for q, d in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InputError(
            f"{len(missing)} graded pair(s) are not in the sample manifest: {shown}{more}",
            hint="grade only pairs of the sample, or pass the manifest of their sample",
        )
    return np.array([1.0 / probs[key] for key in keys], dtype=np.float64)


def copy_manifest_beside(manifest: Manifest, grades_path: str | Path) -> Path:
    """Write the sample's manifest beside a grades file so calibrate finds it; returns its path."""
    target = manifest_path_for(grades_path)
    write_manifest(target, manifest)
    return target
