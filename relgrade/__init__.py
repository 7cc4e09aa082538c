"""relgrade in a notebook: `import relgrade as rg`.

Every function equals its command on the same input: the same numbers, the command's warnings
as Python warnings (`RelgradeWarning`), its errors as the same exceptions with the same
messages (`grader.errors`). Inputs are taken as people hold them: paths (.gz too), DataFrames
with ir_datasets / ir_measures columns (`query_id, doc_id, relevance|grade, score`) or
PyTerrier's (`qid, docno, label, score`), pytrec_eval dicts, iterables of ir_datasets /
ir_measures namedtuples, and a mapping name -> run for several runs. See docs/python-api.md.

A plug-in imports only this package: `register_measure` and `register_judge` with the types
they take (`Measure`, `Ranked`; `Judge`, `JudgeSettings`, `Query`, `Doc`, `Judgment` and the
`ok_judgment` / `failed_judgment` helpers), see docs/adding-a-measure.md and
docs/adding-a-judge.md; `relgrade.testing` checks it as relgrade checks its own.

>>> import relgrade as rg
>>> qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 3}}
>>> runs = {"bm25": {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}},
...         "weak": {"q1": {"d2": 2.0, "d1": 1.0}}}
>>> rg.evaluate(qrels, runs, ["RR(rel=2)@10"])
    run query_id       measure  value
0  bm25      all  RR(rel=2)@10   1.00
1  weak      all  RR(rel=2)@10   0.25
"""

from typing import TYPE_CHECKING

from grader.errors import InputError, JudgeError, RelgradeError, RelgradeWarning
from grader.judges.base import Judge
from grader.judges.base import failed as failed_judgment
from grader.judges.base import ok as ok_judgment
from grader.judges.registry import JudgeSettings, register_judge
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register as register_measure
from grader.models import Doc, Judgment, JudgmentError, Query
from relgrade._calibrate import Calibration, calibrate
from relgrade._evaluate import evaluate, read_qrels, read_run
from relgrade._grade import agrade, grade
from relgrade._sample import Sample, sample

if TYPE_CHECKING:  # loaded on first use (`__getattr__`): PyTerrier is optional
    from relgrade import pyterrier as pyterrier


def __getattr__(name: str) -> object:
    """`rg.pyterrier` (the PyTerrier transformer) loads on first use: PyTerrier is optional."""
    if name == "pyterrier":
        import importlib

        return importlib.import_module("relgrade.pyterrier")
    raise AttributeError(f"module 'relgrade' has no attribute {name!r}")


__all__ = [
    "DEFAULT_THRESHOLD",
    "Calibration",
    "Doc",
    "InputError",
    "Judge",
    "JudgeError",
    "JudgeSettings",
    "Judgment",
    "JudgmentError",
    "Measure",
    "Query",
    "Ranked",
    "RelgradeError",
    "RelgradeWarning",
    "Sample",
    "agrade",
    "calibrate",
    "evaluate",
    "failed_judgment",
    "grade",
    "ok_judgment",
    "read_qrels",
    "read_run",
    "register_judge",
    "register_measure",
    "sample",
]
