"""Human-vs-human agreement beside LLM-vs-human, on the same pairs.

When a second person grades the same sample, the fair question is not "how well does the LLM
agree with one person" but "does it agree with a person about as well as two people agree with
each other". Both figures are computed on the pairs all three graded, so they are comparable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from calibration.agreement import agreement
from calibration.pairs import pair_grades
from grader.errors import InputError

HEADLINE = (
    "exact_agreement",
    "within_one",
    "cohen_kappa",
    "weighted_kappa_linear",
    "weighted_kappa_quadratic",
    "krippendorff_alpha_ordinal",
)


def human_vs_human(human: pd.DataFrame, second: pd.DataFrame, llm: pd.DataFrame) -> dict[str, Any]:
    """Agreement of `second` with `human`, and of the LLM with `human`, on pairs all three graded.

    Returns {"n", "second_only", "humans": {figures}, "llm": {figures}} where figures are the
    `calibration.agreement.agreement` keys in HEADLINE plus `confusion` and `mean_bias`.
    """
    humans = pair_grades(second, human).frame  # "llm" column holds the second person's grades
    llm_side = llm[["query_id", "doc_id", "grade"]].astype({"query_id": str, "doc_id": str})
    three = humans.merge(llm_side, on=["query_id", "doc_id"], how="inner")
    if three.empty:
        raise InputError(
            "no pair is graded by both people and the LLM",
            hint="the second person's file must cover the same sample as --human",
        )
    first = three["human"].to_numpy(dtype=np.int64)
    between = agreement(first, three["llm"].to_numpy(dtype=np.int64))
    with_llm = agreement(first, three["grade"].to_numpy(dtype=np.int64))
    keep = (*HEADLINE, "mean_bias", "confusion")
    return {
        "n": len(three),
        "second_only": int(len(second) - len(humans)),
        "humans": {k: between[k] for k in keep},
        "llm": {k: with_llm[k] for k in keep},
    }
