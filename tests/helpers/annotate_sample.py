"""A small blind sample on disk for the annotate tests."""

from __future__ import annotations

from pathlib import Path

from calibration.spotcheck.blind import BlindItem, write_blind_csv
from calibration.spotcheck.manifest import Manifest, ManifestPair, manifest_path_for, write_manifest

SCRIPT_DOC = '<script>window.pwned = true</script><img src=x onerror="window.pwned=true">bold?'


def write_sample(folder: Path, *, n: int = 4, prompt: str | None = "passage@1") -> Path:
    """sample.csv with n items (the second holds a script) and its manifest beside it."""
    items = [
        BlindItem(
            "q1" if i % 2 == 0 else "q2",
            f"d{i}",
            f"query number {i % 2}",
            SCRIPT_DOC if i == 1 else f"document text {i}\nsecond line",
            title=f"Title {i}",
        )
        for i in range(n)
    ]
    sample = folder / "sample.csv"
    write_blind_csv(sample, items)
    manifest = Manifest(
        strategy="uniform",
        seed=0,
        population=10 * n,
        prompt=prompt,
        pairs=[
            ManifestPair(query_id=i.query_id, doc_id=i.doc_id, inclusion_probability=0.1)
            for i in items
        ],
    )
    write_manifest(manifest_path_for(sample), manifest)
    return sample
