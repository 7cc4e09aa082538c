"""judged_only=True: score the condensed list, the ranking with its unjudged results removed and
its ranks renumbered (trec_eval -J, ir_measures' judged_only; Sakai's condensed lists).

For nDCG, RR, P, R, AP, Rprec and Success; k applies to the condensed list, the qrels side
(recall's denominator, nDCG's ideal) does not change, and a negative grade counts as unjudged."""

from __future__ import annotations

import dataclasses

import numpy as np

from grader.metrics._lists import Grades
from grader.metrics.judged_rows import Ranked
from grader.metrics.rank_order import ranks_within


def condensed(rels: Grades) -> list[int]:
    """One graded list without its unjudged (None) and negatively graded results."""
    return [g for g in rels if g is not None and g >= 0]


def condense(ranked: Ranked) -> Ranked:
    """The condensed lists of every query: judged rows only, ranked 1.. again, `returned`
    counting them."""
    keep = ranked.grade >= 0
    query = ranked.query[keep]
    return dataclasses.replace(
        ranked,
        query=query,
        rank=ranks_within(query),
        grade=ranked.grade[keep],
        returned=np.bincount(query, minlength=ranked.n_queries).astype(np.int64),
    )
