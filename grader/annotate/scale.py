"""The grade scale shown to people: meanings from a prompt file, never written in Python.

The scale's meaning belongs to the prompt file (`[scale]` table). When no prompt is named or it
cannot be loaded, people see the neutral labels 0..3 and the caller is told why.
"""

from __future__ import annotations

from typing import Any

from grader.errors import RelgradeError
from grader.models import GRADES

Scale = list[tuple[int, str]]


def neutral_scale() -> Scale:
    """Grades 0..3 with no meaning attached."""
    return [(g, "") for g in GRADES]


def _as_scale(raw: Any) -> Scale | None:
    if isinstance(raw, dict):
        items = {int(k): str(v) for k, v in raw.items()}
    elif isinstance(raw, list | tuple):
        items = dict(enumerate(str(v) for v in raw))
    else:
        return None
    if set(items) != set(GRADES):
        return None
    return [(g, items[g]) for g in GRADES]


def prompt_scale(name: str) -> Scale:
    """The scale of prompt `name` (a name, `name@version`, or a path) via grader.prompts.

    Raises RelgradeError when the prompt cannot be loaded or has no 0..3 scale.
    """
    try:
        from grader.prompts import load_prompt
    except ImportError:
        raise RelgradeError("prompt files cannot be loaded (grader.prompts is missing)") from None
    spec = load_prompt(name.split("@", 1)[0] if "@" in name and "/" not in name else name)
    for attr in ("scale", "scale_meanings", "meanings"):
        scale = _as_scale(getattr(spec, attr, None))
        if scale is not None:
            return scale
    raise RelgradeError(f"prompt {name!r} has no [scale] with meanings for 0..3")
