"""What `relgrade calibrate` computes, as one typed value: `CalibrationSummary` and its parts.
`to_json()` prints only the keys that were set, so a section without its inputs stays absent
while an undefined figure prints as null."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

Interval = list[float | None]
"""[low, high] of a 95% interval; None where the figure is undefined."""

AGREEMENT_FIGURES: tuple[str, ...] = (
    "exact_agreement",
    "within_one",
    "cohen_kappa",
    "weighted_kappa_linear",
    "weighted_kappa_quadratic",
    "krippendorff_alpha_ordinal",
    "krippendorff_alpha_interval",
    "mean_bias",
)


class SummaryPart(BaseModel):
    """A part of the summary: readable by JSON key too (`s["cohen_kappa"]`), as the dict it was."""

    model_config = ConfigDict(populate_by_name=True, validate_assignment=True)

    def __getitem__(self, key: str) -> Any:
        fields = type(self).model_fields
        by_alias = {f.alias: name for name, f in fields.items() if f.alias}
        name = by_alias.get(key, key)
        if name not in fields:
            raise KeyError(key)
        return getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        """The JSON object: JSON keys (aliases), only the keys that were set, in field order."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class BinaryKappa(SummaryPart):
    """Cohen's kappa after splitting the grades at 1, 2 and 3 (JSON keys "1", "2", "3")."""

    at_1: float | None = Field(alias="1")
    at_2: float | None = Field(alias="2")
    at_3: float | None = Field(alias="3")

    def by_threshold(self) -> list[tuple[int, float | None]]:
        """(threshold, kappa) for 1, 2, 3."""
        return [(1, self.at_1), (2, self.at_2), (3, self.at_3)]


class GradeFigures(SummaryPart):
    """Precision and recall of one LLM grade against the human one, with both supports."""

    precision: float | None
    recall: float | None
    human_count: float
    llm_count: float


class Bootstrap(SummaryPart):
    """How the intervals were drawn."""

    resamples: int
    seed: int
    unit: str


class Counts(SummaryPart):
    """Pairs graded by both, by one side only, and the queries of the paired pairs."""

    paired: int
    llm_only: int
    human_only: int
    queries: int
    design_sample: int | None = None
    """With a manifest: the pairs graded by both that it holds (`DesignSample`); `paired` >= it."""


class QueryFigures(TypedDict):
    """Agreement on one query's pairs."""

    query_id: str
    n: int
    exact_agreement: float | None
    cohen_kappa: float | None
    weighted_kappa_quadratic: float | None
    mean_bias: float | None


class Distributions(TypedDict):
    """Share (weighted) and count of each grade on each side."""

    grades: list[int]
    human: list[float | None]
    human_counts: list[int]
    llm: list[float | None]
    llm_counts: list[int]


class BiasRow(TypedDict):
    """Mean bias of one bucket (document-length quintile or rank range)."""

    bucket: str
    low: int | None
    high: int | None
    n: int
    human_mean: float | None
    llm_mean: float | None
    mean_bias: float | None


class Verdict(SummaryPart):
    """lenient / strict / balanced / inconclusive / unknown / scales_differ, in one sentence."""

    label: str
    text: str
    margin: float | None = None


class BinaryScale(SummaryPart):
    """Binary human grades against the LLM's split at `threshold`."""

    split: str
    threshold: int
    confusion: list[list[float]]
    exact_agreement: float | None
    cohen_kappa: float | None
    human_relevant: float | None
    llm_relevant: float | None
    intervals: dict[str, Interval]


class ConfidenceBin(TypedDict):
    """Exact agreement within one quintile of the judge's confidence."""

    bin: int
    n: int
    mean_confidence: float | None
    exact_agreement: float | None


class Confidence(SummaryPart):
    """The judge's own confidence against agreement (each part only when the judge gave it)."""

    by_confidence: list[ConfidenceBin] | None = None
    expected_calibration_error: float | None = None
    n_with_confidence: int | None = None
    expected_grade_mae: float | None = None
    grade_mae: float | None = None


class SystemRow(TypedDict):
    """One run's mean measure under both label sets and its ranks."""

    run: str
    human: float | None
    llm: float | None
    human_rank: int
    llm_rank: int
    rank_change: int


class Systems(SummaryPart):
    """Every run scored on the paired pool under both label sets, and how the rankings agree."""

    measure: str
    pool: str
    n_systems: int
    kendall_tau: float | None
    spearman_rho: float | None
    tau_ap: float | None
    per_system: list[SystemRow]
    largest_swaps: list[SystemRow]
    intervals: dict[str, Interval]
    left_out: str | None = None
    """Why the comparison is left out: a per-query measure needs whole queries graded."""


class Design(SummaryPart):
    """How the human sample was drawn."""

    kind: str
    source: str
    strategy: str | None
    text: str


class Estimate(SummaryPart):
    """One PPI++ estimate (or an LLM-only figure with the human-based ones None), its estimand,
    design and caution. Keys that only a PPI++ estimate has (`lambda`, `weighted`, ...) are left
    unset in an LLM-only one, and `measure` only belongs to a run's estimate."""

    llm_only: float | None
    human_only: float | None
    ppi: float | None
    ppi_ci: Interval | None
    human_only_ci: Interval | None
    lam: float | None = Field(default=None, alias="lambda")
    n_labelled: int
    n_unlabelled: int
    labelled_clusters: int | None = None
    weighted: bool | None = None
    interval: str | None = None
    measure: str | None = None
    unit: str
    clustered_by: str | None = None
    design: str
    population: str
    estimand: str
    caution: str | None
    cs: Interval | None = None
    """Uniform and active samples: the anytime-valid 95% sequence over the graded prefix."""
    more_for_0_05: int | None = None
    """How many more grades would likely bring the sequence's half-width to 0.05."""
    cs_estimate: float | None = None
    cs_n: int | None = None
    cs_note: str | None = None
    mean_bias: float | None = None
    """`mean_grade` only: the mean LLM grade over the pool minus the estimated mean human grade."""
    mean_bias_ci: Interval | None = None
    """`mean_grade` only: its 95% interval (design-based, from `ppi_ci`)."""


class Estimates(SummaryPart):
    """PPI++ estimates when people graded only part of the LLM-graded pairs."""

    threshold: int
    design: Design
    relevant_share: Estimate
    mean_grade: Estimate | None = None
    """The mean human grade (0..3) and the pool's mean bias (not when people graded 0/1)."""
    runs: dict[str, Estimate] | None = None
    """Each run's estimate of the first (or only) measure."""
    runs_by_measure: dict[str, dict[str, Estimate]] | None = None
    """With runs: each run's estimate of every asked measure, by measure, then run."""


class PairFigures(SummaryPart):
    """The headline agreement figures of one comparison (human vs human, or LLM vs human)."""

    exact_agreement: float | None
    within_one: float | None
    cohen_kappa: float | None
    weighted_kappa_linear: float | None
    weighted_kappa_quadratic: float | None
    krippendorff_alpha_ordinal: float | None
    mean_bias: float | None
    confusion: list[list[int | float]]


class DesignSample(SummaryPart):
    """The manifest's pairs graded by both, weighted by 1/pi: agreement over the population the
    sample was drawn from. `outside` counts the pairs graded by both that the manifest does not
    hold: they count in the top-level agreement (`n`), unweighted, and not here."""

    n: int
    weighted_n: float | None = None
    outside: int
    population: int
    strategy: str
    manifest: str
    exact_agreement: float | None
    within_one: float | None
    cohen_kappa: float | None
    weighted_kappa_linear: float | None
    weighted_kappa_quadratic: float | None
    krippendorff_alpha_ordinal: float | None
    krippendorff_alpha_interval: float | None
    mean_bias: float | None
    confusion: list[list[int | float]]


class HumanVsHuman(SummaryPart):
    """A second person against the first, beside the LLM against the first, on the same pairs."""

    n: int
    second_only: int
    weighted: bool
    humans: PairFigures
    llm: PairFigures


class Inputs(SummaryPart):
    """The files the summary was computed from."""

    llm: str
    human: str
    second_human: str | None
    runs: list[str]


class CalibrationSummary(SummaryPart):
    """Everything `relgrade calibrate` reports (see `calibration.summary.summarize`)."""

    n: int
    weighted: bool
    weighted_n: float | None = None
    exact_agreement: float | None
    within_one: float | None
    cohen_kappa: float | None
    weighted_kappa_linear: float | None
    weighted_kappa_quadratic: float | None
    krippendorff_alpha_ordinal: float | None
    krippendorff_alpha_interval: float | None
    mean_bias: float | None
    binary_kappa: BinaryKappa
    confusion: list[list[int | float]]
    per_grade: dict[str, GradeFigures]
    intervals: dict[str, Interval]
    bootstrap: Bootstrap
    counts: Counts
    threshold: int
    per_query: list[QueryFigures]
    distributions: Distributions
    verdict: Verdict
    binary_scale: BinaryScale | None
    warnings: list[str]
    confidence: Confidence | None = None
    bias_by_length: list[BiasRow] | None
    bias_by_rank: list[BiasRow] | None = None
    systems: Systems | None = None
    """The first (or only) measure's systems section."""
    systems_by_measure: dict[str, Systems] | None = None
    """With runs: every asked measure's systems section, by measure (`systems` is the first)."""
    estimates: Estimates | None = None
    design_sample: DesignSample | None = None
    """With a manifest: its pairs' figures, weighted (see `DesignSample`)."""
    notes: list[str]
    human_vs_human: HumanVsHuman | None = None
    manifest: str | None = None
    inputs: Inputs | None = None

    def figure(self, key: str) -> float | None:
        """One of the AGREEMENT_FIGURES by name."""
        if key not in AGREEMENT_FIGURES:
            raise KeyError(key)
        value: float | None = getattr(self, key)
        return value
