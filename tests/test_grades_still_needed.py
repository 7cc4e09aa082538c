"""The grades still needed for a half-width of 0.05 never exceed the pairs left to grade."""

from __future__ import annotations

from calibration.spotcheck.stopping import more_within
from calibration.stats.confseq import Sequence


def _seq(n: int, sd: float) -> Sequence:
    return Sequence(n=n, estimate=0.4, cs=(0.2, 0.6), half_width=0.2, fixed_ci=(0.3, 0.5), sd=sd)


def test_more_is_capped_at_the_pairs_left_and_said() -> None:
    seq = _seq(60, 0.5)
    assert seq.more_for(0.05) > 114  # the sequence alone asks for more than 174 - 60
    more, note = more_within(seq, 0.05, 174)
    assert more == 114
    assert note is not None and "114 pair(s) left of 174" in note
    assert f"{seq.more_for(0.05)} more grades" in note


def test_more_within_reach_is_the_sequences_own() -> None:
    seq = _seq(60, 0.5)
    more, note = more_within(seq, 0.05, 100_000)
    assert more == seq.more_for(0.05) and note is None


def test_the_sentence_never_says_reached_when_no_pair_is_left() -> None:
    from calibration.report.cells import sequence_sentence
    from calibration.summary_model import Estimate

    wide = Estimate.model_construct(
        cs=(0.2, 0.6), cs_n=174, cs_estimate=0.4, more_for_0_05=0, cs_note=None
    )
    text = sequence_sentence(wide)
    assert text is not None and "reached" not in text and "no pair left" in text
    narrow = Estimate.model_construct(
        cs=(0.38, 0.42), cs_n=174, cs_estimate=0.4, more_for_0_05=0, cs_note=None
    )
    assert "half-width 0.05 reached" in (sequence_sentence(narrow) or "")
