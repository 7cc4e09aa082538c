"""The measures relgrade ships: importing this module registers each. A built-in measure is its
module (ending in one `register(...)` call) plus its name here, in the order
`relgrade evaluate --help` lists them."""

import importlib

MODULES = (
    "ndcg",
    "rr",
    "precision",
    "recall",
    "ap",
    "rprec",
    "success",
    "judged_at_k",
    "err",
    "bpref",
    "numret",
    "numrel",
    "numrelret",
)

for _module in MODULES:
    importlib.import_module(f"grader.metrics.{_module}")
