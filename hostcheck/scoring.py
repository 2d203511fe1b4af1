"""Verdicts, scores and the owner-risk rating (the formulas the README states)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hostcheck.checks import load_registry
from hostcheck.judge import Finding, FindingStatus, run_check

Verdict = Literal["feasible", "feasible with risks", "not feasible", "undetermined"]

SEVERITY_WEIGHT = {"blocker": 3.0, "risk": 1.0, "advice": 0.5}

# What hosting would expose of the owner's own data, network and machine, and how much it weighs.
OWNER_RISK_CHECKS: dict[str, tuple[str, Any]] = {
    "OWN-1010": ("high", None),  # personal credentials on the host
    "ISO-1010": ("high", None),  # a personal machine (desktop session, personal data)
    "DOC-1070": ("high", None),  # container ports bypassing the firewall
    "ISO-1040": ("high", None),  # containers can reach the owner's LAN
    "NET-1010": ("medium", None),  # firewall default-accept
    "SSH-1010": ("medium", None),  # password SSH
    "OWN-1040": ("medium", 0),  # services exposed beyond loopback
    "OWN-1020": ("medium", None),  # personal data unencrypted
    "ISO-1020": ("medium", None),  # humans in the docker group
    "OWN-1030": ("low", None),  # swap in the clear
}
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


def owner_risk(facts: dict[str, Any]) -> OwnerRisk:
    """Rating = the highest level among failed owner-risk checks; 'unknown' when nothing failed
    but something could not be judged; 'low' only when every one of them passed."""
    registry = load_registry()
    rows = []
    worst = -1
    undecided = False
    for check_id, (level, threshold) in OWNER_RISK_CHECKS.items():
        meta = registry[check_id]
        outcome = run_check(meta, facts, threshold)
        status: FindingStatus = "warn" if outcome.status == "fail" else outcome.status  # type: ignore[assignment]
        if outcome.status == "fail":
            worst = max(worst, LEVELS.index(level))
        elif outcome.status in ("unknown", "error"):
            undecided = True
        rows.append(
            {
                "id": check_id,
                "title": meta.title,
                "level": level,
                "status": status,
                "measured": outcome.measured,
                "detail": outcome.detail,
                "fix": meta.fix,
                "fix_role": meta.fix_role,
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
