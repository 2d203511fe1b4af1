"""Judging: run a policy's checks over the facts and turn outcomes into findings."""

from __future__ import annotations

from typing import Any

from hostcheck.checks import load_registry
from hostcheck.checks.base import CheckMeta, Outcome
from hostcheck.errors import Missing
from hostcheck.facts import to_jsonable
from hostcheck.models import Finding, Policy, Requirement, Severity, SourceRef, Status


def run_check(meta: CheckMeta, facts: dict[str, Any], threshold: Any) -> Outcome:
    """Run one check; a missing fact is 'unknown', any other exception is an 'error' outcome."""
    try:
        outcome = meta.outcome(meta.func(facts, threshold))
    except Missing as missing:
        return Outcome(Status.UNKNOWN, None, f"{missing.path}: {missing.reason}")
    except Exception as exc:  # a broken check must never read as a pass
        return Outcome(Status.ERROR, None, f"check raised {type(exc).__name__}: {exc}")
    if not isinstance(outcome, Outcome):
        return Outcome(Status.ERROR, None, f"check returned {type(outcome).__name__}, not an Outcome")
    return outcome


def finding_status(outcome_status: Status, severity: Severity) -> Status:
    if outcome_status == Status.FAIL:
        return Status.FAIL if severity == Severity.BLOCKER else Status.WARN
    return Status(outcome_status)


def source_ref(req: Requirement) -> SourceRef:
    return SourceRef(title=req.source.title, url=req.source.url, checked=req.source.checked)


def judge_requirement(req: Requirement, facts: dict[str, Any], registry: dict[str, CheckMeta]) -> Finding:
    meta = registry[req.check]
    outcome = run_check(meta, facts, req.threshold)
    return Finding(
        id=meta.id,
        title=meta.title,
        family=meta.family,
        severity=req.severity,
        status=finding_status(outcome.status, req.severity),
        measured=to_jsonable(outcome.measured),
        threshold=req.threshold,
        op=meta.op,
        unit=meta.unit,
        detail=outcome.detail,
        why=meta.why,
        fix=meta.fix,
        fix_role=meta.fix_role,
        source=source_ref(req),
        note=req.note,
    )


def judge_policy(policy: Policy, facts: dict[str, Any]) -> list[Finding]:
    registry = load_registry()
    return [judge_requirement(req, facts, registry) for req in policy.requirements]
