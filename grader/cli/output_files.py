"""Before a command writes its outputs: remove what killed runs left beside them, and say so."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from grader.job import judgments_and_qrels


def clean_outputs(paths: Sequence[str | Path | None]) -> None:
    """`judgments_and_qrels.clean_outputs`, said on stderr."""
    for line in judgments_and_qrels.clean_outputs(paths):
        print(line, file=sys.stderr)
