"""Pages from `string.Template` files in `templates/` (`$name` slots don't clash with CSS braces).
Filling escapes by default: only `Markup` (HTML built here from escaped parts) goes in as is,
since documents, query ids and run names are untrusted."""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from string import Template


class Markup(str):
    """HTML built by the report code from escaped parts: goes into a template as is."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """`value` as HTML text (quotes escaped too)."""
    return Markup(html.escape(str(value)))


@cache
def _text(name: str) -> str:
    return (files("calibration.report") / "templates" / name).read_text(encoding="utf-8")


def template(name: str) -> Template:
    """The page skeleton `templates/<name>` (its final newline dropped: pages end at the tag)."""
    return Template(_text(name).removesuffix("\n"))


def stylesheet() -> str:
    """The reports' shared stylesheet."""
    return _text("report.css")


def fill(page: Template, **values: object) -> str:
    """`page` with every slot filled: `Markup` as is, anything else HTML-escaped. A missing or
    unknown slot is an error, never a silently empty spot."""
    names = set(page.get_identifiers())
    if names != set(values):
        missing, unknown = sorted(names - set(values)), sorted(set(values) - names)
        raise KeyError(f"template slots: missing {missing}, unknown {unknown}")
    safe = {k: v if isinstance(v, Markup) else escape(v) for k, v in values.items()}
    return page.substitute(safe)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str, caption: str = ""
) -> Markup:
    """A table; `rows` hold cells that are HTML already (numbers, or escaped text)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return Markup(
        f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )
