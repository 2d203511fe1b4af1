"""Phrases shared by the terminal and Markdown renderers."""

from __future__ import annotations

from typing import Any

from hostcheck.models import UNDECIDED, Finding, Operator, OwnerRiskFinding, Status, Verdict

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
NEEDS_ATTENTION = (*NEEDS_FIX, *UNDECIDED)


def _with_unit(value: Any, unit: str) -> str:
    return f"{value} {unit}" if unit and isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def measured_text(check_id: str, measured: Any, unit: str = "") -> str:
    """The measured value as it follows the title: a statement true by itself, whatever the
    value ("PasswordAuthentication yes", never a bare "yes" after "SSH password login off")."""
    if measured is None or isinstance(measured, dict):
        return ""
    from hostcheck.checks import load_registry

    meta = load_registry().get(check_id)
    if meta is not None and meta.shown is not None:
        return meta.says(measured)
    return _with_unit(measured, unit)


def threshold_text(finding: Finding) -> str:
    threshold = finding.threshold
    if threshold is None:
        return ""
    if isinstance(threshold, list):
        return f"one of {', '.join(map(str, threshold))}"
    if isinstance(threshold, str) and finding.op == Operator.EQ:
        return ""  # a statement (e.g. why a platform is closed), not a bar to clear
    return f"{finding.op} {_with_unit(threshold, finding.unit)}"


def headline(finding: Finding) -> str:
    """'GPU-1050 GPU power limit vs its default: 0.36 ratio (needs >= 0.9 ratio)'."""
    text = f"{finding.id} {finding.title}"
    measured, needs = measured_text(finding.id, finding.measured, finding.unit), threshold_text(finding)
    if measured:
        text += f": {measured}"
    if needs:
        text += f" (needs {needs})"
    return text


def grouped_unknowns(findings: list[Finding]) -> list[tuple[Status, list[str], str]]:
    """Unknown/error findings grouped by their reason, so one missing fact is said once."""
    groups: dict[tuple[Status, str], list[str]] = {}
    for finding in findings:
        if finding.status in UNDECIDED:
            groups.setdefault((finding.status, finding.detail or "no reason given"), []).append(finding.id)
    ordered = sorted(groups.items(), key=lambda item: (item[0][0] != Status.ERROR, item[1][0]))
    return [(status, ids, reason) for (status, reason), ids in ordered]


def needs_attention(finding: Finding) -> bool:
    return finding.status in NEEDS_ATTENTION


def risk_row_text(row: OwnerRiskFinding) -> str:
    """One owner-risk line: what was measured and the evidence, whichever exist."""
    shown = measured_text(row.id, row.measured) if row.measured != "" else ""
    parts = [shown, row.detail]
    return f"{row.id} {row.title}: " + " — ".join(p for p in parts if p)
