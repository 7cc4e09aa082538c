"""Flags that several commands share, defined once so each means one thing everywhere.

`--store` defaults to relgrade.db in every command; `-m/--measure` and `--run` take several
values either way (`-m A B` or `-m A -m B`, `--run A B` or `--run A --run B`). A flag that keeps
one value is an error when given twice (`StoreOnce`, every parser's default action through
`Parser`): never silently the last one.
"""

from __future__ import annotations

import argparse
import weakref
from collections.abc import Sequence
from typing import Any

from grader import defaults


class StoreOnce(argparse._StoreAction):
    """argparse's `store`, but a second occurrence of the flag in one command line is an
    error naming it (exit 2), instead of silently replacing the first value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the namespaces (by id: a Namespace is not hashable) this flag was given in, each
        # forgotten with its namespace
        self._seen: weakref.WeakValueDictionary[int, argparse.Namespace] = (
            weakref.WeakValueDictionary()
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if self.option_strings and self._seen.get(id(namespace)) is namespace:
            raise argparse.ArgumentError(
                self,
                f"given more than once; it takes one value (was {getattr(namespace, self.dest)!r}"
                f", then {values!r}): give it once",
            )
        self._seen[id(namespace)] = namespace
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """The parser of `relgrade` and of each of its commands (sub-parsers take its class): an
    option declared with no action, or `store`, keeps one value and refuses a second
    (`StoreOnce`); repeatable options say so (`append`, `extend`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)


DEFAULT_STORE = defaults.STORE
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
