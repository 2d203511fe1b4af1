"""The Markdown report, for forum posts and tickets: the same answer as the terminal's first
screen, then (with ``--details``) every finding once."""

from __future__ import annotations

from hostcheck.headline import cannot_apply_line
from hostcheck.models import Report, Status
from hostcheck.render.text import (
    NEEDS_FIX,
    STATUS_LABEL,
    VERDICT_MARK,
    finding_line,
    findings_once,
    policy_counts,
    risk_row_text,
    step_text,
    unknown_text,
    where_text,
)
from hostcheck.rules_age import stale_line


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def render_markdown(report: Report, *, verbose: bool = False) -> str:
    answer = report.answer
    host = report.host.hostname or "this host"
    read = f", platform rules read {report.rules_read}" if report.rules_read else ""
    lines = [f"# hostcheck report — {host}", "", f"hostcheck {report.tool.version}, {report.generated_at}{read}", ""]
    lines += [f"**{' '.join(answer.headline)}**", ""]
    stale = stale_line(report.rules_read, report.generated_at)
    lines += [stale, ""] if stale else []
    lines += ["| policy | verdict | score | blockers/risks/unknown |", "|---|---|---|---|"]
    lines += [f"| {p.id} | **{VERDICT_MARK[p.verdict]}** | {p.score} | {policy_counts(p)} |"
              for p in report.policies if p.applicable]
    cannot = cannot_apply_line(report.policies)
    if cannot:
        lines += ["", cannot]
    lines += ["", answer.owner_risk]
    if answer.plan or answer.plan_note:
        heading = "What to do, in order" + (" (roles of the Ansible host profile: docs/roles.md)"
                                            if any(s.role for s in answer.plan + answer.later) else "")
        lines += ["", f"## {heading}", ""]
        lines += [f"{n}. {step_text(step)}" for n, step in enumerate(answer.plan, 1)]
        if answer.plan_note:
            lines += ["", answer.plan_note]
        if answer.later:  # a document has room: the steps the note counts, listed
            lines += [""] + [f"{n}. {step_text(step)}" for n, step in enumerate(answer.later, len(answer.plan) + 1)]
    if answer.unknowns:
        lines += ["", "## Not judged, by cause", ""]
        lines += [f"- {unknown_text(group)}" for group in answer.unknowns]
    if verbose:
        lines += ["", "## Policies", ""]
        lines += [f"- **{p.id}**: {p.title} — {VERDICT_MARK[p.verdict]}, {p.score}/100. {p.summary}" for p in report.policies]
        lines += ["", "## Every finding, once", "", "| status | id | line | policies | fix | source |",
                  "|---|---|---|---|---|---|"]
        for worst, uses in findings_once(report):
            fix = (worst.fix + (f" (Ansible {worst.fix_role})" if worst.fix_role else "")) if worst.status in NEEDS_FIX else ""
            source = f"[{worst.source.title}]({worst.source.url}) ({worst.source.checked})"
            line = finding_line(worst.id, worst.status, worst.measured, None, worst.detail)
            cells = (STATUS_LABEL[worst.status], worst.id, line, where_text(uses), fix, source)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        risk = report.owner_risk
        lines += ["", f"## Owner risk: {risk.rating.upper()}", "", risk.statement, ""]
        for row in risk.findings:
            label = row.level if row.status == Status.WARN else row.status
            lines.append(f"- ({label}) {risk_row_text(row)}")
    lines.append("")
    return "\n".join(lines)
