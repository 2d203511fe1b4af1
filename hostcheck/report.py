"""The report: facts + per-policy verdicts + owner risk, as one JSON-ready document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hostcheck import __version__
from hostcheck.exit_codes import EXIT_NOT_FEASIBLE, EXIT_OK, EXIT_OWNER_RISK
from hostcheck.facts import lookup, to_jsonable
from hostcheck.headline import applicability, headline
from hostcheck.judge import judge_policy
from hostcheck.policy import Policy
from hostcheck.scoring import owner_risk, score, verdict

REPORT_VERSION = 1

STATUS_ORDER = {"fail": 0, "error": 1, "warn": 2, "unknown": 3, "pass": 4, "skipped": 5}
FEASIBLE = ("feasible", "feasible with risks")
# An owner risk that never lets the audit exit 0 unless the user accepts it explicitly.
OWNER_RISK_STOPS = ("high", "unknown")


def build_report(facts: dict[str, Any], policies: list[Policy]) -> dict[str, Any]:
    results = []
    for policy in policies:
        findings = judge_policy(policy, facts)
        ordered = sorted(findings, key=lambda f: (STATUS_ORDER[f.status], f.id))
        precondition = applicability(findings)
        results.append(
            {
                "id": policy.id,
                "title": policy.title,
                "platform": policy.platform,
                "kind": policy.kind,
                "summary": policy.summary,
                "follows": policy.follows,
                "verdict": verdict(findings),
                "score": score(findings),
                "blockers": [f.id for f in ordered if f.status == "fail"],
                "risks": [f.id for f in ordered if f.status == "warn"],
                "unknowns": [f.id for f in ordered if f.status in ("unknown", "error")],
                "applicable": not precondition,
                "precondition": precondition,
                "findings": [f.as_dict() for f in ordered],
            }
        )
    risk = owner_risk(facts)
    hostname = lookup(facts, "meta.hostname")
    return {
        "report_version": REPORT_VERSION,
        "tool": {"name": "hostcheck", "version": __version__},
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"hostname": hostname if isinstance(hostname, str) else None},
        "headline": headline(results, risk.rating, to_jsonable(risk.findings)),
        "policies": results,
        "owner_risk": {
            "rating": risk.rating,
            "statement": risk.statement,
            "findings": to_jsonable(risk.findings),
        },
        "facts": to_jsonable(facts),
    }


def exit_code(report: dict[str, Any], strict: bool = False, accept_owner_risk: bool = False) -> int:
    """3 when no requested policy is feasible (with strict: when any is not); otherwise 4 when
    the owner risk is high or unknown and the user has not accepted it; otherwise 0."""
    verdicts = [p["verdict"] for p in report["policies"]]
    if strict:
        ok = bool(verdicts) and all(v in FEASIBLE for v in verdicts)
    else:
        ok = any(v in FEASIBLE for v in verdicts)
    if not ok:
        return EXIT_NOT_FEASIBLE
    if report["owner_risk"]["rating"] in OWNER_RISK_STOPS and not accept_owner_risk:
        return EXIT_OWNER_RISK
    return EXIT_OK
