"""Where the TREC DL 2019 data lives, and trec_eval's ranking order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DL2019 = Path(__file__).resolve().parents[3] / "shared" / "data" / "trec-dl-2019"


def trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking: float32 score descending, then doc id descending."""
    return sorted(docs, key=lambda d: (np.float32(docs[d]), d), reverse=True)
