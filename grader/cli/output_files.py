"""Before a command writes its outputs: remove what killed runs left beside them, and say so."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from grader.io.files import remove_stale_temp_files
from grader.io.output_set import OutputSet


def clean_outputs(paths: Sequence[str | Path | None]) -> None:
    """Remove stale temp files of `paths` and warn (stderr) when a killed run left them half
    written: which were rewritten and which were not."""
    targets = [Path(p) for p in paths if p]
    for target in targets:
        for stale in remove_stale_temp_files(target):
            print(
                f"removed {stale}: a temp file left by a run killed while writing {target}",
                file=sys.stderr,
            )
    previous = OutputSet(targets).previous() if targets else None
    if previous is not None:
        print(
            f"warning: {previous.describe()}; this run rewrites them when it finishes",
            file=sys.stderr,
        )
