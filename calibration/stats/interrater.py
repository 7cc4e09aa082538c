"""Human-vs-human agreement beside LLM-vs-human, on the pairs all three graded, with the same
weights: does the LLM agree with a person about as well as two people agree with each other?
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.join import pair_grades
from calibration.stats.agreement import agreement
from calibration.summary_model import AGREEMENT_FIGURES
from grader.errors import InputError

HEADLINE = AGREEMENT_FIGURES[:6]  # exact_agreement .. krippendorff_alpha_ordinal


def human_vs_human(
    human: pd.DataFrame,
    second: pd.DataFrame,
    llm: pd.DataFrame,
    weights: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Agreement of `second` with `human`, and of the LLM with `human`, on the pairs all three
    graded, weighted alike by `weights` (query_id, doc_id, weight); mean bias is minus `human`."""
    humans = pair_grades(second, human).frame  # "llm" column holds the second person's grades
    llm_side = llm[["query_id", "doc_id", "grade"]].astype({"query_id": str, "doc_id": str})
    three = humans.merge(llm_side, on=["query_id", "doc_id"], how="inner")
    if three.empty:
        raise InputError(
            "no pair is graded by both people and the LLM",
            hint="the second person's file must cover the same sample as --human",
        )
    w: npt.NDArray[np.float64] | None = None
    if weights is not None:
        keyed = weights[["query_id", "doc_id", "weight"]].astype({"query_id": str, "doc_id": str})
        joined = three[["query_id", "doc_id"]].merge(keyed, on=["query_id", "doc_id"], how="left")
        if joined["weight"].isna().any():
            row = joined[joined["weight"].isna()].iloc[0]
            raise InputError(
                f"pair ({row['query_id']}, {row['doc_id']}) graded by both people has no weight",
                hint="weights must cover every pair graded by --human and the LLM",
            )
        w = joined["weight"].to_numpy(dtype=np.float64)
    first = three["human"].to_numpy(dtype=np.int64)
    between = agreement(first, three["llm"].to_numpy(dtype=np.int64), w)
    with_llm = agreement(first, three["grade"].to_numpy(dtype=np.int64), w)
    keep = (*HEADLINE, "mean_bias", "confusion")
    return {
        "n": len(three),
        "second_only": int(len(second) - len(humans)),
        "weighted": w is not None,
        "humans": {k: between[k] for k in keep},
        "llm": {k: with_llm[k] for k in keep},
    }
