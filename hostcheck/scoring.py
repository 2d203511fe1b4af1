"""Verdicts, scores and the owner-risk rating (the formulas the README states)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hostcheck.checks import load_registry
from hostcheck.judge import Finding, FindingStatus, run_check
from hostcheck.policy import Policy, load_owner_risk

Verdict = Literal["feasible", "feasible with risks", "not feasible", "undetermined"]

SEVERITY_WEIGHT = {"blocker": 3.0, "risk": 1.0, "advice": 0.5}

LEVELS = ("low", "medium", "high")


def verdict(findings: list[Finding]) -> Verdict:
    """Not feasible on any failed blocker; undetermined if a blocker could not be judged;
    feasible with risks if any risk or advice is not met; else feasible."""
    blockers = [f for f in findings if f.severity == "blocker"]
    if any(f.status == "fail" for f in blockers):
        return "not feasible"
    if any(f.status in ("unknown", "error") for f in blockers):
        return "undetermined"
    if any(f.status == "warn" for f in findings):
        return "feasible with risks"
    return "feasible"


def score(findings: list[Finding]) -> int:
    """100 x (weight of passed findings) / (weight of all findings but skipped ones).

    Weights: blocker 3, risk 1, advice 0.5. Unknown and error count as not passed, so an
    audit that could not look scores low rather than high.
    """
    counted = [f for f in findings if f.status != "skipped"]
    total = sum(SEVERITY_WEIGHT[f.severity] for f in counted)
    if total == 0:
        return 0
    got = sum(SEVERITY_WEIGHT[f.severity] for f in counted if f.status == "pass")
    return round(100 * got / total)


@dataclass(frozen=True)
class OwnerRisk:
    rating: str  # low | medium | high | unknown
    findings: list[dict[str, Any]]
    statement: str


def owner_risk(facts: dict[str, Any], policy: Policy | None = None) -> OwnerRisk:
    """Rating = the highest level among failed owner-risk checks; 'unknown' when nothing failed
    but something could not be judged; 'low' only when every one of them passed.

    The checks and their levels are the shipped owner-risk policy (policies/owner-risk.yaml)."""
    registry = load_registry()
    policy = load_owner_risk() if policy is None else policy
    rows = []
    worst = -1
    undecided = False
    for req in policy.requirements:
        check_id, level = req.check, req.level
        meta = registry[check_id]
        outcome = run_check(meta, facts, req.threshold)
        status: FindingStatus = "warn" if outcome.status == "fail" else outcome.status
        if outcome.status == "fail":
            worst = max(worst, LEVELS.index(level))
        elif outcome.status in ("unknown", "error"):
            undecided = True
        rows.append(
            {
                "id": check_id,
                "title": meta.title,
                "note": req.note,
                "level": level,
                "status": status,
                "measured": outcome.measured,
                "detail": outcome.detail,
                "fix": meta.fix,
                "fix_role": meta.fix_role,
                "source": {"title": req.source.title, "url": req.source.url, "checked": req.source.checked},
            }
        )
    if worst >= 0:
        rating = LEVELS[worst]
    else:
        rating = "unknown" if undecided else "low"
    statements = {
        "high": "Hosting here would expose your own data or network: strangers' code would run "
        "next to your personal accounts and credentials. Do not host on this machine as it is.",
        "medium": "Hosting here would leave parts of this machine open to the workloads you run "
        "and to the internet; fix the items below before you host.",
        "low": "Nothing personal was found exposed; hosting strangers' workloads still carries "
        "the risk of a container escape, so keep this machine free of anything you value.",
        "unknown": "hostcheck could not see enough to rate your exposure (run as root for a "
        "fuller view); treat it as high until shown otherwise.",
    }
    return OwnerRisk(rating, rows, statements[rating])
