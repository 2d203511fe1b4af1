"""Judging: run a policy's checks over the facts and turn outcomes into findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hostcheck.checks import load_registry
from hostcheck.checks.base import CheckMeta, Missing, Outcome
from hostcheck.facts import to_jsonable
from hostcheck.policy import Policy, Requirement

FindingStatus = Literal["pass", "warn", "fail", "unknown", "skipped", "error"]


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    family: str
    severity: str
    status: FindingStatus
    measured: Any
    threshold: Any
    op: str
    unit: str
    detail: str
    why: str
    fix: str
    fix_role: str
    source: dict[str, str]
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "family": self.family,
            "severity": self.severity,
            "status": self.status,
            "measured": to_jsonable(self.measured),
            "threshold": self.threshold,
            "op": self.op,
            "unit": self.unit,
            "detail": self.detail,
            "why": self.why,
            "fix": self.fix,
            "fix_role": self.fix_role,
            "source": self.source,
            "note": self.note,
        }


def run_check(meta: CheckMeta, facts: dict[str, Any], threshold: Any) -> Outcome:
    """Run one check; a missing fact is 'unknown', any other exception is an 'error' outcome."""
    try:
        outcome = meta.func(facts, threshold)
    except Missing as missing:
        return Outcome("unknown", None, f"{missing.path}: {missing.reason}")
    except Exception as exc:  # a broken check must never read as a pass
        return Outcome("error", None, f"check raised {type(exc).__name__}: {exc}")
    if not isinstance(outcome, Outcome):
        return Outcome("error", None, f"check returned {type(outcome).__name__}, not an Outcome")
    return outcome


def finding_status(outcome_status: str, severity: str) -> FindingStatus:
    if outcome_status == "fail":
        return "fail" if severity == "blocker" else "warn"
    return outcome_status  # type: ignore[return-value]


def judge_requirement(req: Requirement, facts: dict[str, Any], registry: dict[str, CheckMeta]) -> Finding:
    meta = registry[req.check]
    outcome = run_check(meta, facts, req.threshold)
    return Finding(
        id=meta.id,
        title=meta.title,
        family=meta.family,
        severity=req.severity,
        status=finding_status(outcome.status, req.severity),
        measured=outcome.measured,
        threshold=req.threshold,
        op=meta.op,
        unit=meta.unit,
        detail=outcome.detail,
        why=meta.why,
        fix=meta.fix,
        fix_role=meta.fix_role,
        source={"title": req.source.title, "url": req.source.url, "checked": req.source.checked},
        note=req.note,
    )


def judge_policy(policy: Policy, facts: dict[str, Any]) -> list[Finding]:
    registry = load_registry()
    return [judge_requirement(req, facts, registry) for req in policy.requirements]
