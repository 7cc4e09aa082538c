"""`relgrade.pyterrier.Grader`: grading as a PyTerrier transformer (needs `relgrade[pyterrier]`).

PyTerrier's transformers are plain Python: no Java starts for this one. Put it after a retrieval
stage (cut to the depth you want graded, e.g. `bm25 % 10`); it adds a `label` column, the grade
of each (qid, docno), so PyTerrier's experiments can score runs with it. A failed pair's label is
`<NA>`, never 0.

>>> import pyterrier as pt, pandas as pd
>>> from relgrade.pyterrier import Grader
>>> results = pd.DataFrame({"qid": ["q1"], "query": ["sort a list"], "docno": ["d1"],
...                         "text": ["def sort_list(xs): return sorted(xs)"],
...                         "score": [1.0], "rank": [0]})
>>> Grader(judge="lexical", store="doc.db", progress=False)(results)["label"].notna().tolist()
[True]
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyterrier as pt

from grader.io.python_inputs import id_text
from relgrade._grade import grade


class Grader(pt.Transformer):
    """Grade each row of a PyTerrier result frame (`qid, query, docno` and `text`, or texts from
    `docs`: a path, a dict, a DataFrame or an ir_datasets dataset); `options` are
    `relgrade.grade`'s (judge, model, base_url, prompt, store, concurrency, ...). Adds `label`
    (a nullable integer) and keeps every other column."""

    def __init__(self, docs: Any = None, **options: Any) -> None:
        self.docs = docs
        self.options = options

    def transform(self, results: pd.DataFrame) -> pd.DataFrame:
        if results.empty:
            return results.assign(label=pd.Series(dtype="Int64"))
        graded = grade(results, docs=self.docs, **self.options)
        labels = graded[["query_id", "doc_id", "grade"]].rename(
            columns={"query_id": "qid", "doc_id": "docno", "grade": "label"}
        )
        keys = results[["qid", "docno"]].apply(lambda ids: id_text(ids, "results"))
        merged = keys.merge(labels, on=["qid", "docno"], how="left")
        return results.assign(label=merged["label"].astype("Int64").array)
