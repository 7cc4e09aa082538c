"""Combining several judges' answers for one pair: ensembles and low-grade verification.

An ensemble's grade is the LOWER median of its ok members' grades (always a grade some judge gave);
failed members are left out, and when all failed the pair fails. Disagreement is max - min, None
with fewer than two ok answers. `--verify-low` sends grades 0 and 1 to a second judge whose answer,
when it has one, is final; both answers are kept in `verification`.
"""

from __future__ import annotations

from typing import Any

from grader.models import GRADES, Judgment, JudgmentError, Usage

LOW_GRADES = (0, 1)
AGGREGATE_RULE = "lower-median"
VERIFY_RULE = "verifier-grade-when-ok"


def lower_median(grades: list[int]) -> int:
    """The median of `grades`; with an even count, the lower of the two middle grades."""
    if not grades:
        raise ValueError("no grades to aggregate")
    ordered = sorted(grades)
    return ordered[(len(ordered) - 1) // 2]


def _member_names(members: list[Judgment]) -> list[str]:
    names: list[str] = []
    for m in members:
        name, n = m.judge, 2
        while name in names:
            name, n = f"{m.judge}#{n}", n + 1
        names.append(name)
    return names


def _sum_cost(judgments: list[Judgment]) -> float | None:
    costs = [j.cost for j in judgments if j.cost is not None]
    return sum(costs) if costs else None


def combine_members(members: list[Judgment], *, key: str, judge_id: str) -> Judgment:
    """The ensemble's judgment of one pair from its members' judgments (module docstring)."""
    first = members[0]
    names = _member_names(members)
    ok = [m for m in members if m.status == "ok" and m.grade is not None]
    common: dict[str, Any] = {
        "query_id": first.query_id,
        "doc_id": first.doc_id,
        "judge": judge_id,
        "prompt": first.prompt,
        "key": key,
        "attempts": sum(m.attempts for m in members),
        "usage": sum((m.usage for m in members), Usage()),
        "cost": _sum_cost(members),
        "latency_ms": max((m.latency_ms or 0.0 for m in members), default=None),
        "truncated": any(m.truncated for m in members),
        "judges": {n: m.grade for n, m in zip(names, members, strict=True)},
    }
    if not ok:
        detail = "; ".join(
            f"{n}: {m.error.type}: {m.error.message}" if m.error else n
            for n, m in zip(names, members, strict=True)
        )
        return Judgment(
            status="failed",
            error=JudgmentError(type="EnsembleFailed", message=f"every judge failed ({detail})"),
            **common,
        )
    grades = [m.grade for m in ok if m.grade is not None]
    grade = lower_median(grades)
    distribution = expected = None
    dists = [m.distribution for m in ok if m.distribution is not None]
    if len(dists) == len(ok):
        distribution = [sum(d[g] for d in dists) / len(dists) for g in GRADES]
        expected = sum(g * p for g, p in enumerate(distribution))
    reason = next((m.reason for m in ok if m.grade == grade), None)
    return Judgment(
        status="ok",
        grade=grade,
        reason=reason,
        distribution=distribution,
        expected_grade=expected,
        disagreement=float(max(grades) - min(grades)) if len(grades) >= 2 else None,
        **common,
    )


def needs_verification(judgment: Judgment) -> bool:
    """Whether `--verify-low` sends this pair to the verifier: an ok grade of 0 or 1."""
    return judgment.status == "ok" and judgment.grade in LOW_GRADES


def _summary(j: Judgment) -> dict[str, Any]:
    return {
        "judge": j.judge,
        "prompt": str(j.prompt) if j.prompt else None,
        "key": j.key,
        "status": j.status,
        "grade": j.grade,
        "reason": j.reason,
        "error": j.error.model_dump() if j.error else None,
    }


def apply_verification(
    primary: Judgment, verifier: Judgment, *, key: str | None = None
) -> Judgment:
    """The pair's final judgment once the verifier answered (module docstring), under `key`."""
    final_grade = verifier.grade if verifier.status == "ok" else primary.grade
    update: dict[str, Any] = {
        "key": key or primary.key,
        "grade": final_grade,
        "judge": f"{primary.judge}+verify:{verifier.judge}",
        "attempts": primary.attempts + verifier.attempts,
        "usage": primary.usage + verifier.usage,
        "cost": _sum_cost([primary, verifier]),
        "truncated": primary.truncated or verifier.truncated,
        "verification": {
            "rule": VERIFY_RULE,
            "primary": _summary(primary),
            "verifier": _summary(verifier),
        },
    }
    if verifier.status == "ok":
        update.update(
            reason=verifier.reason,
            distribution=verifier.distribution,
            expected_grade=verifier.expected_grade,
        )
    return Judgment.model_validate({**primary.model_dump(), **update})
