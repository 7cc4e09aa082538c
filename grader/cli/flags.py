"""Flags that several commands share, defined once so each means one thing everywhere.

`--store` defaults to relgrade.db in every command; `-m/--measure` and `--run` take several
values either way (`-m A B` or `-m A -m B`, `--run A B` or `--run A --run B`).
"""

from __future__ import annotations

import argparse

DEFAULT_STORE = "relgrade.db"
"""Where every command keeps (or looks for) judgments, texts and batch jobs by default."""


def add_store(p: argparse.ArgumentParser, what: str = "judgment store, SQLite") -> None:
    """--store DB, default relgrade.db."""
    p.add_argument(
        "--store", default=DEFAULT_STORE, metavar="DB", help=f"{what} (default {DEFAULT_STORE})"
    )


def add_runs(
    p: argparse.ArgumentParser, what: str = "TREC run(s)", *, required: bool = False
) -> None:
    """--run RUN [RUN ...], repeatable: every value is kept, in order."""
    p.add_argument(
        "--run",
        action="extend",
        nargs="+",
        required=required,
        default=None if required else [],
        metavar="RUN",
        help=f"{what}; several: --run A B or --run A --run B",
    )


def add_measures(p: argparse.ArgumentParser, what: str) -> None:
    """-m/--measure MEASURE [MEASURE ...], repeatable: every value is kept, in order (dest
    `measures`; an empty list when not given)."""
    p.add_argument(
        "-m",
        "--measure",
        dest="measures",
        action="extend",
        nargs="+",
        default=[],
        metavar="MEASURE",
        help=f"{what}; several: -m A B or -m A -m B",
    )
