"""Verdicts, scores and the owner-risk rating (the formulas the README states)."""

from __future__ import annotations

from typing import Any

from hostcheck.checks import load_registry
from hostcheck.facts import to_jsonable
from hostcheck.headline import agent_root_rows
from hostcheck.judge import run_check, source_ref
from hostcheck.models import (
    UNDECIDED,
    Finding,
    Level,
    OwnerRisk,
    OwnerRiskFinding,
    Policy,
    Rating,
    Severity,
    Status,
    Verdict,
)
from hostcheck.policy import load_owner_risk

SEVERITY_WEIGHT = {Severity.BLOCKER: 3.0, Severity.RISK: 1.0, Severity.ADVICE: 0.5}

LEVELS = tuple(Level)  # in rising order


def verdict(findings: list[Finding]) -> Verdict:
    """Not feasible on any failed blocker; undetermined if a blocker could not be judged;
    feasible with risks if any risk or advice is not met; else feasible."""
    blockers = [f for f in findings if f.severity == Severity.BLOCKER]
    if any(f.status == Status.FAIL for f in blockers):
        return Verdict.NOT_FEASIBLE
    if any(f.status in UNDECIDED for f in blockers):
        return Verdict.UNDETERMINED
    if any(f.status == Status.WARN for f in findings):
        return Verdict.FEASIBLE_WITH_RISKS
    return Verdict.FEASIBLE


def score(findings: list[Finding]) -> int:
    """100 x (weight of passed findings) / (weight of all findings but skipped ones).

    Weights: blocker 3, risk 1, advice 0.5. Unknown and error count as not passed, so an
    audit that could not look scores low rather than high.
    """
    counted = [f for f in findings if f.status != Status.SKIPPED]
    total = sum(SEVERITY_WEIGHT[f.severity] for f in counted)
    if total == 0:
        return 0
    got = sum(SEVERITY_WEIGHT[f.severity] for f in counted if f.status == Status.PASS)
    return round(100 * got / total)


def owner_risk(facts: dict[str, Any], policy: Policy | None = None) -> OwnerRisk:
    """Rating = the worst of what failed and of what could not be judged: the highest level
    among failed owner-risk checks, unless a check that could not be judged would rate higher
    when it fails; then 'unknown', with that level as what it possibly is. 'low' only when
    every one of them passed.

    The checks and their levels are the shipped owner-risk policy (policies/owner-risk.yaml)."""
    registry = load_registry()
    policy = load_owner_risk() if policy is None else policy
    rows: list[OwnerRiskFinding] = []
    worst_failed = worst_unseen = -1
    for req in policy.requirements:
        meta = registry[req.check]
        level = Level(req.level or Level.LOW)
        outcome = run_check(meta, facts, req.threshold)
        status = Status.WARN if outcome.status == Status.FAIL else outcome.status
        if outcome.status == Status.FAIL:
            worst_failed = max(worst_failed, LEVELS.index(level))
        elif outcome.status in UNDECIDED:
            worst_unseen = max(worst_unseen, LEVELS.index(level))
        rows.append(
            OwnerRiskFinding(
                id=req.check,
                title=meta.title,
                note=req.note,
                level=level,
                status=status,
                measured=to_jsonable(outcome.measured),
                detail=outcome.detail,
                fix=meta.fix,
                fix_role=meta.fix_role,
                source=source_ref(req),
            )
        )
    possibly = None
    if worst_unseen > worst_failed:
        rating, possibly = Rating.UNKNOWN, LEVELS[worst_unseen]
    elif worst_failed >= 0:
        rating = Rating(LEVELS[worst_failed])
    else:
        rating = Rating.LOW
    statements = {
        # The items named before it say what is exposed; this sentence claims nothing more.
        Rating.HIGH: "Hosting here would expose your own data or network to strangers' code. Do not host on "
        "this machine as it is.",
        Rating.MEDIUM: "Hosting here would leave parts of this machine open to the workloads you run "
        "and to the internet; fix the items below before you host.",
        Rating.LOW: "Nothing personal was found exposed; hosting strangers' workloads still carries "
        "the risk of a container escape, so keep this machine free of anything you value.",
        Rating.UNKNOWN: f"hostcheck could not see enough to rate your exposure: it is possibly "
        f"{(possibly or Level.HIGH).upper()} (run as root for a fuller view); treat it as that until shown otherwise.",
    }
    return OwnerRisk(rating=rating, possibly=possibly, findings=rows,
                     statement=statement(rating, rows, statements[rating]))


MAX_NAMED = 4


def _says_agent_root_and_more() -> set[str]:
    """The checks an agent-root check (AGT-1010, AGT-1020) is superseded by: OWN-1050 says the
    agent's root on a personal machine (and that it reaches the owner's own things), so it is
    named like them."""
    return {m.superseded_by for m in load_registry().values() if m.says_agent_has_root and m.superseded_by}


def statement(rating: Rating, rows: list[OwnerRiskFinding], general: str) -> str:
    """The owner-risk paragraph: which items make the rating what it is (each one's note and
    what was measured), then what that rating means in general."""
    if rating not in (Rating.HIGH, Rating.MEDIUM):
        return general
    # The rating's own items, and always the agent's root: installing the agent is the owner's
    # decision to hand the platform this machine, whatever else sets the rating.
    rooted = {r.id for r in agent_root_rows(rows)}
    named = [r for r in rows if (r.status == Status.WARN and r.level == Level(rating.value)) or r.id in rooted]
    if not named:
        return general
    # The agent's root is never left to "more below": the other items share what room is left.
    speaking = rooted | _says_agent_root_and_more()
    agent = {r.id for r in named if r.id in speaking}
    room = max(0, MAX_NAMED - len(agent))
    others = [r for r in named if r.id not in agent]
    shown = [r for r in named if r.id in agent or r in others[:room]]
    items = "; ".join(f"{r.note or r.title} ({r.detail})" if r.detail else (r.note or r.title) for r in shown)
    more = f"; and {len(named) - len(shown)} more below" if len(named) > len(shown) else ""
    return f"{rating.value.upper()} because of: {items}{more}. {general}"
