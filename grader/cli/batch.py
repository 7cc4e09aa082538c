"""`relgrade batch` (being built; see the issue tracker)."""

from __future__ import annotations

import argparse
from typing import Any

from grader.errors import RelgradeError


def register(sub: Any) -> None:
    parser = sub.add_parser("batch", help="(not built yet)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise RelgradeError("relgrade batch is not built yet")
