"""judged_only=True: score the condensed list, the ranking with its unjudged results removed.

    condensed = [ d in ranking : d has a grade ], ranks renumbered 1, 2, ...

Then any measure is computed on the condensed list as usual (trec_eval -J, ir_measures'
`judged_only=True`; Sakai's condensed-list measures). With incomplete labels, as LLM labels
are, it scores a run on what was judged instead of counting every missing label as
non-relevant; `Judged@k` says how much was removed.

- Which measures: those ir_measures defines judged_only on that relgrade has: nDCG, RR, P,
  R, AP, Rprec, Success. k applies to the condensed list (P@10 looks at the first 10 judged
  results and still divides by 10).
- The qrels side does not change: recall denominators and nDCG's ideal use every judgment.
- A negative grade counts as unjudged here, as trec_eval (and so ir_measures) reads it.
- Edge cases: a query whose results are all unjudged has an empty condensed list and scores
  0; it still counts in the mean (it was answered).
"""

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
