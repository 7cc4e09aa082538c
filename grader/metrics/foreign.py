"""Names from other tools, keeping their meaning. trec_eval's (`P_10`, `map`, `ndcg_cut_10` ...)
mean what trec_eval computes at its level (`-l`): `P_10` is `P(rel=1)@10`. ir_measures' objects
mean what `calc_aggregate` computes: rel=1 by default, its RR@k and Judged@k rank ties by doc id
ascending (`ties=asc`), Judged@k divides by min(k, returned). Nothing here imports ir_measures."""

from __future__ import annotations

import re
from typing import Any

from grader.metrics import registry

TREC_EVAL_LEVEL = 1
"""trec_eval's default relevance level (`-l`)."""

_WITH_CUTOFF = re.compile(r"^\s*([A-Za-z_]+?)[._](\d+)\s*$")

_BARE = {
    "map": "AP",
    "recip_rank": "RR",
    "ndcg": "nDCG",
    "Rprec": "Rprec",
    "bpref": "Bpref",
    "num_ret": "NumRet",
    "num_rel": "NumRel",
    "num_rel_ret": "NumRelRet",
}
"""trec_eval's words without a cutoff, as trec_eval spells them."""

_ANY_CASE = {"map", "recip_rank", "num_ret", "num_rel", "num_rel_ret"}
"""Those of them that are trec_eval's in any case (relgrade's own names are `AP`, `RR`,
`NumRet`...; `nDCG`, `Bpref` and `Rprec` written otherwise are relgrade's)."""

_IR_MEASURES = {
    "P",
    "R",
    "RR",
    "AP",
    "nDCG",
    "Rprec",
    "Success",
    "Judged",
    "ERR",
    "Bpref",
    "NumRet",
    "NumRel",
}
"""ir_measures' measure names (their `NAME`) relgrade computes."""


def trec_eval_spelling(name: str, level: int = TREC_EVAL_LEVEL) -> str | None:
    """relgrade's spelling of trec_eval's name `name` at relevance level `level` (`P_10` ->
    `P(rel=1)@10`), or None when `name` is not one of trec_eval's names."""
    stripped = name.strip()
    family: str | None
    match = _WITH_CUTOFF.match(stripped)
    if match:
        family, cutoff = registry.trec_eval_family(match.group(1)), f"@{match.group(2)}"
    else:
        word = stripped.lower() if stripped.lower() in _ANY_CASE else stripped
        family, cutoff = _BARE.get(word), ""
    if family is None:
        return None
    takes_rel = registry.get(family).rel
    return f"{family}(rel={level}){cutoff}" if takes_rel else f"{family}{cutoff}"


def parse_ties(text: str) -> str | None:
    """The parser of `ties=`: `asc` as ir_measures' RR@k and Judged@k rank ties (doc id
    ascending, scores in double precision); `desc` (the default) as trec_eval does."""
    if text not in ("asc", "desc"):
        raise ValueError("ties= is desc (trec_eval's order, the default) or asc (ir_measures')")
    return "asc" if text == "asc" else None


def is_ir_measures(measure: object) -> bool:
    """Whether `measure` is an ir_measures measure object (it has `NAME` and `params`)."""
    return isinstance(getattr(measure, "NAME", None), str) and isinstance(
        getattr(measure, "params", None), dict
    )


def ir_measures_spelling(measure: Any) -> str | None:
    """relgrade's spelling of an ir_measures object with ir_measures' defaults written
    (`ir_measures.P@10` -> `P(rel=1)@10`), or None when relgrade does not compute it."""
    family = str(measure.NAME)
    if family not in _IR_MEASURES:
        return None
    params = dict(measure.params)
    cutoff = params.pop("cutoff", None)
    supported = getattr(measure, "SUPPORTED_PARAMS", {})
    if "rel" in supported and "rel" not in params:
        default = getattr(supported["rel"], "default", None)
        if isinstance(default, int):
            params["rel"] = default  # ir_measures' default threshold: 1
    parts = [f"{key}={_value(value)}" for key, value in params.items()]
    if family == "Judged" and cutoff is not None:
        parts.append("of=returned")  # ir_measures divides by min(k, returned)
    if family in ("RR", "Judged") and cutoff is not None and not params.get("judged_only"):
        parts.append("ties=asc")  # MS MARCO's script and ir_measures' Judged: doc id ascending
    text = family + (f"({','.join(parts)})" if parts else "")
    return text + (f"@{cutoff}" if cutoff is not None else "")


def _value(value: object) -> str:
    """A parameter value as relgrade's names write it (ir_measures' Python literals)."""
    if isinstance(value, dict):
        return registry.format_gains(tuple(sorted(value.items())))
    if isinstance(value, str):
        return f"'{value}'"
    return str(value)
