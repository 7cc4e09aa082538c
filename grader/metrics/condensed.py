"""judged_only=True: the condensed list, the ranking without its unjudged (or negatively graded)
results, ranks renumbered (trec_eval -J); k applies to it, the qrels side does not change."""

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
