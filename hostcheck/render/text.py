"""Phrases shared by the terminal and Markdown renderers: labels, finding lines, the plan's
steps and the unknown groups, each said one way."""

from __future__ import annotations

from typing import Any

from hostcheck.models import (
    UNDECIDED,
    Finding,
    OwnerRiskFinding,
    PlanStep,
    PolicyResult,
    Report,
    Status,
    UnknownGroup,
    Verdict,
)
from hostcheck.report import STATUS_ORDER
from hostcheck.wording import counted, plural

VERDICT_MARK: dict[Verdict, str] = {verdict: verdict.upper() for verdict in Verdict}
STATUS_LABEL: dict[Status, str] = {
    Status.FAIL: "BLOCKER",
    Status.WARN: "RISK",
    Status.UNKNOWN: "UNKNOWN",
    Status.ERROR: "ERROR",
    Status.PASS: "ok",
    Status.SKIPPED: "skipped",
}
NEEDS_FIX = (Status.FAIL, Status.WARN)
MAX_IDS = 4
OUTCOME_WORD: dict[Status, str] = {
    Status.FAIL: "not met", Status.WARN: "not met", Status.PASS: "met", Status.UNKNOWN: "not judged",
    Status.ERROR: "not judged", Status.SKIPPED: "skipped",
}


def measured_text(check_id: str, measured: Any, unit: str = "") -> str:
    """The measured value as a statement true by itself ("PasswordAuthentication yes")."""
    if measured is None or isinstance(measured, dict):
        return ""
    from hostcheck.checks import load_registry

    meta = load_registry().get(check_id)
    if meta is not None and meta.shown is not None:
        return meta.says(measured)
    if unit and isinstance(measured, (int, float)) and not isinstance(measured, bool):
        return f"{measured} {unit}"
    return str(measured)


def finding_line(check_id: str, status: Status, measured: Any, threshold: Any = None, detail: str = "") -> str:
    """A finding's line as its check's registry entry phrases it: the requirement, then what
    was found (or why it could not be judged)."""
    from hostcheck.checks import load_registry

    meta = load_registry().get(check_id)
    if meta is None:  # a check of a foreign report
        return f"{check_id}: {measured_text(check_id, measured)} {detail}".strip()
    return meta.line(measured, threshold, detail, judged=status not in UNDECIDED)


def risk_row_text(row: OwnerRiskFinding) -> str:
    """One owner-risk line: the check's line (requirement — found)."""
    return f"{row.id} {finding_line(row.id, row.status, row.measured, None, row.detail)}"


def ids_text(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS])
    return shown + (f" and {len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")


def step_text(step: PlanStep) -> str:
    """'set ssh_hardening_enabled (role ssh_hardening): clears SSH-1010, SSH-1040; lowers
    owner risk (MEDIUM item); unlocks vast'."""
    parts = [f"clears {ids_text(step.clears)}"]
    if step.lowers is not None:
        parts.append(f"lowers owner risk ({step.lowers.upper()})")
    if step.unlocks:
        parts.append(f"then {', '.join(step.unlocks)} {plural(len(step.unlocks), 'accepts')} it")
    if step.dedicated_only:
        parts.append("only on a machine dedicated to hosting")
    return f"{step.action}: {'; '.join(parts)}."


def unknown_text(group: UnknownGroup) -> str:
    """'reading them needs root: 5 checks not judged (ISO-1040, ...); run `sudo "$(command -v hostcheck)" audit`'."""
    count = counted(len(group.checks), "check")
    text = f"{group.cause}: {count} not judged ({ids_text(group.checks)})"
    return text + (f"; {group.then}" if group.then else "")


def policy_counts(policy: PolicyResult) -> str:
    return f"{len(policy.blockers)}/{len(policy.risks)}/{len(policy.unknowns)}"


def findings_once(report: Report) -> list[tuple[Finding, list[tuple[PolicyResult, Finding]]]]:
    """Every check judged, once: its worst finding, and each policy that holds it (with that
    policy's own finding: severity and threshold differ between policies)."""
    by_id: dict[str, list[tuple[PolicyResult, Finding]]] = {}
    for policy in report.policies:
        for finding in policy.findings:
            by_id.setdefault(finding.id, []).append((policy, finding))
    out = []
    for uses in by_id.values():
        worst = min((f for _, f in uses), key=lambda f: STATUS_ORDER[f.status])
        out.append((worst, uses))
    out.sort(key=lambda item: (STATUS_ORDER[item[0].status], item[0].id))
    return out


def where_text(uses: list[tuple[PolicyResult, Finding]]) -> str:
    """'vast (blocker, >= 16 GiB), salad (risk)' — the policies a finding affects."""
    from hostcheck.checks import load_registry

    registry = load_registry()
    parts = []
    for policy, finding in uses:
        meta = registry.get(finding.id)
        bar = meta.threshold_text(finding.threshold) if meta is not None else ""
        outcome = OUTCOME_WORD[finding.status]
        parts.append(f"{policy.id} ({finding.severity}{', ' + bar if bar else ''}: {outcome})")
    return ", ".join(parts)
