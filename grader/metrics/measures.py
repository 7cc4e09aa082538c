"""Measure names as small immutable values that parse from and print back to the same string.

Names follow ir_measures: `nDCG@10`, `nDCG`, `RR`, `RR@10`, `P@10`, `R@100`, `AP`, `AP@100`,
`Rprec`, `Success@10`, `Judged@10`; a binary threshold is written `(rel=N)` and exponential gain
`(gain=exp)`, e.g. `P(rel=3)@10`, `nDCG(gain=exp)@10`.

The binary threshold defaults to 2 (grades 0..3: TREC DL's and the specification's convention)
and is always printed, so `RR` prints as `RR(rel=2)`: a number never travels without the
threshold that produced it. `relgrade evaluate` parses names with the default its qrels call
for (`default_threshold`: 1 for binary qrels, else 2). nDCG uses the grades themselves as gains
and Judged counts any grade, so neither takes a threshold.

ir_measures' own spellings mean what they mean there (see `spellings`): `nDCG(dcg='exp-log2')`
is `nDCG(gain=exp)` and prints so; `nDCG(gains={0:0,1:1,2:3,3:7})` is a custom gain map;
`judged_only=True` scores the condensed list on P, RR, R, AP, Rprec, Success and nDCG.
The counts NumRet, NumRel(rel=N) and NumRelRet(rel=N) (ir_measures' NumRet(rel=N)) are summed
over queries, not averaged, as trec_eval and ir_measures do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.errors import InputError
from grader.metrics import spellings

DEFAULT_THRESHOLD = 2
MIN_THRESHOLD = 1

#: Canonical family names; the value says whether the family takes a threshold and a cutoff.
FAMILIES: dict[str, tuple[bool, bool]] = {
    # name: (takes rel=, takes @k)
    "nDCG": (False, True),
    "RR": (True, True),
    "P": (True, True),
    "R": (True, True),
    "AP": (True, True),
    "Rprec": (True, False),
    "Success": (True, True),
    "Judged": (False, True),
    "ERR": (False, True),
    "Bpref": (True, False),
    "NumRet": (False, False),
    "NumRel": (True, False),
    "NumRelRet": (True, False),
}

#: Families whose "all" row is the sum over queries (trec_eval's and ir_measures' counts).
SUMMED = frozenset({"NumRet", "NumRel", "NumRelRet"})

#: Families that take `judged_only=True` (those ir_measures defines it on).
JUDGED_ONLY = frozenset({"nDCG", "RR", "P", "R", "AP", "Rprec", "Success"})

#: Other spellings people type (matched case-insensitively) and the family they mean.
ALIASES: dict[str, str] = {
    "ndcg": "nDCG",
    "rr": "RR",
    "mrr": "RR",
    "recip_rank": "RR",
    "p": "P",
    "precision": "P",
    "r": "R",
    "recall": "R",
    "ap": "AP",
    "map": "AP",
    "rprec": "Rprec",
    "success": "Success",
    "judged": "Judged",
    "err": "ERR",
    "bpref": "Bpref",
    "numret": "NumRet",
    "num_ret": "NumRet",
    "numrel": "NumRel",
    "num_rel": "NumRel",
    "numrelret": "NumRelRet",
    "num_rel_ret": "NumRelRet",
}

GAINS = ("linear", "exp")

#: trec_eval's names with a cutoff (`ndcg_cut_10`, `P.10`, `recall_100`, ...), accepted too.
TREC_EVAL_CUT: dict[str, str] = {
    "ndcg_cut": "nDCG",
    "p": "P",
    "recall": "R",
    "map_cut": "AP",
    "success": "Success",
}
_TREC_EVAL_RE = re.compile(r"^\s*(ndcg_cut|P|recall|map_cut|success)[._](\d+)\s*$", re.IGNORECASE)
_NAME_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\(([^)]*)\))?\s*(?:@\s*(\S+))?\s*$")

MEASURE_HELP = (
    "nDCG@k (linear gain, or nDCG(gain=exp)@k), RR(rel=N)@k, P(rel=N)@k, R(rel=N)@k, "
    "AP(rel=N)[@k], Rprec(rel=N), Success(rel=N)@k, Judged@k, ERR@k, Bpref(rel=N), NumRet, "
    "NumRel(rel=N), NumRelRet(rel=N); the @k part is optional except for P, R and Success; "
    "ir_measures' nDCG(dcg='exp-log2'), nDCG(gains={0:0,1:1,2:3,3:7}) and judged_only=True "
    "(on nDCG, RR, P, R, AP, Rprec, Success) are accepted"
)


@dataclass(frozen=True, order=True)
class Measure:
    """One measure: family name, cutoff k (None = whole ranking), threshold and gain.

    `rel` is the binary threshold (a document is relevant when grade >= rel); it is None for
    nDCG and Judged. `gain` is "linear" or "exp" for nDCG and None otherwise. `gains` is
    nDCG's custom grade -> gain map (sorted, identity entries dropped; empty = none) and
    `judged_only` scores the condensed list (unjudged results removed).
    """

    name: str
    cutoff: int | None = None
    rel: int | None = None
    gain: str | None = None
    gains: spellings.Gains = ()
    judged_only: bool = False

    def __str__(self) -> str:
        params = []
        if self.rel is not None:
            params.append(f"rel={self.rel}")
        if self.gain == "exp":
            params.append("gain=exp")
        if self.gains:
            params.append(f"gains={spellings.format_gains(self.gains)}")
        if self.judged_only:
            params.append("judged_only=True")
        text = self.name + (f"({','.join(params)})" if params else "")
        return text + (f"@{self.cutoff}" if self.cutoff is not None else "")

    @property
    def threshold(self) -> int:
        """The binary threshold; only for measures that take one."""
        if self.rel is None:
            raise ValueError(f"{self} has no binary threshold")
        return self.rel


def _bad(name: str, why: str, hint: str = MEASURE_HELP) -> InputError:
    return InputError(f"measure {name!r}: {why}", hint=hint)


def parse_measure(name: str | Measure, *, default_rel: int = DEFAULT_THRESHOLD) -> Measure:
    """Parse `nDCG@10`, `RR(rel=3)@10`, `nDCG(gain=exp)` ... into a Measure.

    The family is matched case-insensitively (`MRR` and `map` are accepted as RR and AP, and
    trec_eval's `ndcg_cut_10`, `P_10`, `recall_100`, `map_cut_10`, `success_10` too; note that
    they get relgrade's default threshold, shown in the printed name, not trec_eval's 1);
    `str(parse_measure(x))` is the canonical spelling, with the threshold explicit.
    Raises InputError naming what is wrong and listing the valid names.
    """
    if isinstance(name, Measure):
        return name
    trec = _TREC_EVAL_RE.match(name)
    if trec:
        name = f"{TREC_EVAL_CUT[trec.group(1).lower()]}@{trec.group(2)}"
    match = _NAME_RE.match(name)
    if not match:
        raise _bad(name, "not a measure name")
    family_text, params_text, cutoff_text = match.groups()
    family = ALIASES.get(family_text.lower())
    if family is None:
        raise _bad(name, f"unknown measure {family_text!r}")
    parts = spellings.split_params(params_text)
    if family == "NumRet" and any(p.partition("=")[0].strip() == "rel" for p in parts):
        family = "NumRelRet"  # ir_measures' NumRet(rel=N) is trec_eval's num_rel_ret
    takes_rel, takes_cutoff = FAMILIES[family]
    cutoff: int | None = None
    if cutoff_text is not None:
        if not takes_cutoff:
            raise _bad(name, f"{family} takes no @k cutoff")
        if not cutoff_text.isdigit() or int(cutoff_text) < 1:
            raise _bad(name, f"the cutoff {cutoff_text!r} must be a positive integer")
        cutoff = int(cutoff_text)
    elif family in ("P", "Success"):
        raise _bad(name, f"{family} needs a cutoff, e.g. {family}@10")
    rel: int | None = default_rel if takes_rel else None
    gain: str | None = "linear" if family == "nDCG" else None
    gains: spellings.Gains = ()
    judged_only = False
    for part in parts:
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep:
            raise _bad(name, f"parameter {part.strip()!r} must be key=value")
        if key == "rel":
            if not takes_rel:
                raise _bad(
                    name,
                    f"{family} takes no threshold",
                    "nDCG uses the grades as gains and Judged counts any grade",
                )
            if not value.isdigit() or int(value) < MIN_THRESHOLD:
                raise _bad(
                    name,
                    f"rel={value} is not a grade threshold",
                    "use a whole number from 1 up: rel=2 for 0..3 grades, rel=1 for binary qrels",
                )
            rel = int(value)
        elif key == "gain":
            if family != "nDCG":
                raise _bad(name, f"{family} takes no gain")
            if value not in GAINS:
                raise _bad(name, f"unknown gain {value!r}", "use gain=linear or gain=exp")
            gain = value
        elif key in ("dcg", "gains", "judged_only"):
            gain, gains, judged_only = _ir_measures_param(
                name, family, key, value, (gain, gains, judged_only)
            )
        else:
            raise _bad(
                name,
                f"unknown parameter {key!r}",
                "parameters are rel=N, gain=exp (or dcg='exp-log2'), gains={grade:gain,...} "
                "and judged_only=True",
            )
    if gains and gain == "exp":
        raise _bad(name, "exponential gain and a gains map contradict", "give one of them")
    return Measure(family, cutoff, rel, gain, gains, judged_only)


def _ir_measures_param(
    name: str, family: str, key: str, value: str, current: tuple[str | None, spellings.Gains, bool]
) -> tuple[str | None, spellings.Gains, bool]:
    """Apply one of ir_measures' `dcg=`, `gains=`, `judged_only=` to (gain, gains, judged_only)."""
    gain, gains, judged_only = current
    if key == "judged_only" and family not in JUDGED_ONLY:
        raise _bad(
            name,
            f"{family} takes no judged_only",
            "judged_only=True is for " + ", ".join(sorted(JUDGED_ONLY)),
        )
    if key != "judged_only" and family != "nDCG":
        raise _bad(name, f"{family} takes no {key}", f"{key}= is for nDCG")
    try:
        if key == "judged_only":
            return gain, gains, spellings.parse_flag(value)
        if key == "dcg":
            return spellings.parse_dcg(value), gains, judged_only
        return gain, spellings.parse_gains(value), judged_only
    except ValueError as error:
        raise _bad(name, str(error)) from None


def parse_measures(names: list[str] | tuple[str, ...]) -> list[Measure]:
    """Parse several names, dropping repeats while keeping the given order."""
    seen: dict[Measure, None] = {}
    for name in names:
        seen.setdefault(parse_measure(name), None)
    return list(seen)


#: Without a threshold written, so that `evaluate` gives them the one the qrels call for.
DEFAULT_MEASURES: tuple[str, ...] = (
    "nDCG@10",
    "RR@10",
    "P@10",
    "R@100",
    "AP",
    "Judged@10",
)

BINARY_THRESHOLD = 1


def default_threshold(max_grade: int | None) -> int:
    """The threshold a name without `(rel=N)` gets for qrels whose highest grade is `max_grade`.

    1 for binary qrels (no grade above 1: MS MARCO's and BEIR's 0/1), where 2 would leave every
    query without a relevant document; DEFAULT_THRESHOLD (2) for graded qrels (TREC DL's 0..3,
    TREC Web's -2..4) and when there are no grades (None).
    """
    if max_grade is not None and max_grade <= BINARY_THRESHOLD:
        return BINARY_THRESHOLD
    return DEFAULT_THRESHOLD


def uses_default_threshold(name: str | Measure) -> bool:
    """Whether a name takes a threshold but does not write one (`RR@10`, `P_10`, `map`)."""
    if isinstance(name, Measure):
        return False
    return parse_measure(name, default_rel=BINARY_THRESHOLD) != parse_measure(
        name, default_rel=DEFAULT_THRESHOLD
    )
