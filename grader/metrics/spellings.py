"""ir_measures' parameter spellings in a measure name: `dcg='exp-log2'` (`gain=exp`),
`gains={0:0,1:1,2:3,3:7}` (identity entries dropped) and `judged_only=True`; each function raises
ValueError saying what is wrong."""

from __future__ import annotations

import re

Gains = tuple[tuple[int, int], ...]

DCG_GAINS = {"log2": "linear", "exp-log2": "exp"}
_INT = re.compile(r"^[+-]?\d+$")


def unquote(value: str) -> str:
    """A word with or without matching single or double quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_dcg(value: str) -> str:
    """`log2` -> "linear", `exp-log2` -> "exp" (relgrade's gain names)."""
    word = unquote(value)
    if word not in DCG_GAINS:
        raise ValueError(f"unknown dcg {value!r}; use dcg='log2' or dcg='exp-log2'")
    return DCG_GAINS[word]


def parse_flag(value: str) -> bool:
    """`True` / `False` (ir_measures' spelling; lower case accepted too)."""
    word = unquote(value).lower()
    if word not in ("true", "false"):
        raise ValueError(f"{value!r} is not True or False")
    return word == "true"


def parse_gains(value: str) -> Gains:
    """`{0:0,1:1,2:3,3:7}` -> ((2, 3), (3, 7)): sorted by grade, identity entries dropped."""
    text = value.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"gains={value} must be a map in braces, e.g. gains={{0:0,1:1,2:3,3:7}}")
    mapping: dict[int, int] = {}
    for item in (p.strip() for p in text[1:-1].split(",")):
        if not item:
            continue
        grade, sep, gain = (s.strip() for s in item.partition(":"))
        if not sep or not _INT.match(grade) or not _INT.match(gain):
            raise ValueError(f"gains entry {item!r} must be grade:gain, two integers")
        if int(grade) < 0:
            raise ValueError(f"gains names grade {grade}; negative grades always gain 0")
        if int(grade) in mapping:
            raise ValueError(f"gains names grade {int(grade)} twice")
        if int(gain) < 0:
            raise ValueError(
                f"gain {gain} for grade {grade} is negative; trec_eval (which ir_measures runs "
                "for custom gains) reads a negative qrels value as unjudged, so use gains >= 0"
            )
        mapping[int(grade)] = int(gain)
    return tuple((g, v) for g, v in sorted(mapping.items()) if g != v)


def format_gains(gains: Gains) -> str:
    """The map as ir_measures prints it: `{2:3,3:7}`."""
    return "{" + ",".join(f"{g}:{v}" for g, v in gains) + "}"
