"""The report: facts + per-policy verdicts + owner risk, as one model (JSON only when written out)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hostcheck import __version__
from hostcheck.answer import build_answer
from hostcheck.exit_codes import EXIT_NOT_FEASIBLE, EXIT_OK, EXIT_OWNER_RISK
from hostcheck.facts import hostname, to_jsonable
from hostcheck.headline import applicability
from hostcheck.judge import judge_policy
from hostcheck.models import (
    FEASIBLE,
    OWNER_RISK_STOPS,
    REPORT_VERSION,
    UNDECIDED,
    Host,
    Policy,
    PolicyResult,
    Report,
    Status,
    Tool,
)
from hostcheck.policy import load_owner_risk
from hostcheck.rules_age import now as clock
from hostcheck.rules_age import rules_read
from hostcheck.scoring import owner_risk, score, verdict

__all__ = ["REPORT_VERSION", "build_report", "exit_code"]

# The order findings are listed in: what stops hosting first, what passed last.
STATUS_ORDER = {status: rank for rank, status in enumerate(
    (Status.FAIL, Status.ERROR, Status.WARN, Status.UNKNOWN, Status.PASS, Status.SKIPPED))}


def build_report(facts: dict[str, Any], policies: list[Policy], now: datetime | None = None) -> Report:
    """The report on ``facts`` judged by ``policies`` and the owner-risk set, made at ``now``
    (default: :func:`hostcheck.rules_age.now`, the clock unless HOSTCHECK_NOW says otherwise)."""
    results = []
    for policy in policies:
        findings = judge_policy(policy, facts)
        ordered = sorted(findings, key=lambda f: (STATUS_ORDER[f.status], f.id))
        precondition = applicability(findings)
        results.append(
            PolicyResult(
                id=policy.id,
                title=policy.title,
                platform=policy.platform,
                kind=policy.kind,
                summary=policy.summary,
                follows=policy.follows,
                verdict=verdict(findings),
                score=score(findings),
                blockers=[f.id for f in ordered if f.status == Status.FAIL],
                risks=[f.id for f in ordered if f.status == Status.WARN],
                unknowns=[f.id for f in ordered if f.status in UNDECIDED],
                applicable=not precondition,
                precondition=precondition,
                findings=ordered,
            )
        )
    risk_policy = load_owner_risk()
    risk = owner_risk(facts, risk_policy)
    answer = build_answer(results, risk)
    read = rules_read([*policies, risk_policy])
    assert read is not None  # the owner-risk set is judged in every report, and each of its items cites a source
    return Report(
        report_version=REPORT_VERSION,
        tool=Tool(name="hostcheck", version=__version__),
        generated_at=(clock() if now is None else now).isoformat(timespec="seconds"),
        rules_read=read,
        host=Host(hostname=hostname(facts)),
        headline=" ".join(answer.headline),
        answer=answer,
        policies=results,
        owner_risk=risk,
        facts=to_jsonable(facts),
    )


def exit_code(report: Report, strict: bool = False, accept_owner_risk: bool = False) -> int:
    """3 when no requested policy is feasible (with strict: when any is not); otherwise 4 when
    the owner risk is high or unknown and the user has not accepted it; otherwise 0."""
    verdicts = [p.verdict for p in report.policies]
    if strict:
        ok = bool(verdicts) and all(v in FEASIBLE for v in verdicts)
    else:
        ok = any(v in FEASIBLE for v in verdicts)
    if not ok:
        return EXIT_NOT_FEASIBLE
    if report.owner_risk.rating in OWNER_RISK_STOPS and not accept_owner_risk:
        return EXIT_OWNER_RISK
    return EXIT_OK
