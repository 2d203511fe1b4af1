"""Phrases shared by the terminal and Markdown renderers."""

from __future__ import annotations

from typing import Any

from hostcheck.models import UNDECIDED, Status, Verdict

VERDICT_MARK: dict[str, str] = {verdict: verdict.upper() for verdict in Verdict}
STATUS_LABEL: dict[str, str] = {
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


def measured_text(finding: dict[str, Any]) -> str:
    """The measured value as it follows the title: a statement true by itself, whatever the
    value ("PasswordAuthentication yes", never a bare "yes" after "SSH password login off")."""
    measured = finding.get("measured")
    if measured is None or isinstance(measured, dict):
        return ""
    from hostcheck.checks import load_registry

    meta = load_registry().get(str(finding.get("id")))
    if meta is not None and meta.shown is not None:
        return meta.says(measured)
    return _with_unit(measured, finding.get("unit", ""))


def threshold_text(finding: dict[str, Any]) -> str:
    threshold = finding.get("threshold")
    if threshold is None:
        return ""
    if isinstance(threshold, list):
        return f"one of {', '.join(map(str, threshold))}"
    if isinstance(threshold, str) and finding["op"] == "==":
        return ""  # a statement (e.g. why a platform is closed), not a bar to clear
    return f"{finding['op']} {_with_unit(threshold, finding.get('unit', ''))}"


def headline(finding: dict[str, Any]) -> str:
    """'GPU-1050 GPU power limit vs its default: 0.36 ratio (needs >= 0.9 ratio)'."""
    text = f"{finding['id']} {finding['title']}"
    measured, needs = measured_text(finding), threshold_text(finding)
    if measured:
        text += f": {measured}"
    if needs:
        text += f" (needs {needs})"
    return text


def grouped_unknowns(findings: list[dict[str, Any]]) -> list[tuple[str, list[str], str]]:
    """Unknown/error findings grouped by their reason, so one missing fact is said once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for finding in findings:
        if finding["status"] in UNDECIDED:
            groups.setdefault((finding["status"], finding.get("detail") or "no reason given"), []).append(finding["id"])
    ordered = sorted(groups.items(), key=lambda item: (item[0][0] != Status.ERROR, item[1][0]))
    return [(status, ids, reason) for (status, reason), ids in ordered]


def needs_attention(finding: dict[str, Any]) -> bool:
    return finding["status"] in NEEDS_ATTENTION


def risk_row_text(row: dict[str, Any]) -> str:
    """One owner-risk line: what was measured and the evidence, whichever exist."""
    measured = row.get("measured")
    shown = measured_text({"id": row.get("id"), "measured": measured}) if measured != "" else ""
    parts = [shown, row.get("detail") or ""]
    return f"{row['id']} {row['title']}: " + " — ".join(p for p in parts if p)
