"""The Markdown report, for forum posts and tickets."""

from __future__ import annotations

from hostcheck.headline import cannot_apply_line
from hostcheck.models import UNDECIDED, Report, Status
from hostcheck.render.text import (
    NEEDS_FIX,
    STATUS_LABEL,
    VERDICT_MARK,
    measured_text,
    needs_attention,
    risk_row_text,
    threshold_text,
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def render_markdown(report: Report, *, verbose: bool = False) -> str:
    host = report.host.hostname or "this host"
    lines = [f"# hostcheck report — {host}", "", f"hostcheck {report.tool.version}, {report.generated_at}", ""]
    lines += [f"**{report.headline}**", ""]
    lines += ["| policy | verdict | score | blockers | risks | unknown |", "|---|---|---|---|---|---|"]
    for p in report.policies:
        lines.append(
            f"| {p.id} | **{VERDICT_MARK[p.verdict]}** | {p.score} | "
            f"{', '.join(p.blockers) or '-'} | {', '.join(p.risks) or '-'} | {', '.join(p.unknowns) or '-'} |"
        )
    risk = report.owner_risk
    lines += ["", f"## Owner risk: {risk.rating.upper()}", "", risk.statement, ""]
    for row in risk.findings:
        if row.status in (Status.WARN, *UNDECIDED):
            lines.append(f"- ({row.level if row.status == Status.WARN else row.status}) {risk_row_text(row)}")
    cannot = cannot_apply_line(report.policies)
    if cannot:
        lines += ["", cannot]
    for p in report.policies:
        if not verbose and not p.applicable:
            continue
        lines += ["", f"## {p.title}: {VERDICT_MARK[p.verdict]} ({p.score}/100)", "", p.summary, ""]
        if p.follows:
            lines += [f"*Where sources disagree:* {p.follows}", ""]
        shown = [f for f in p.findings if verbose or needs_attention(f)]
        if not shown:
            lines.append("Every requirement met.")
            continue
        lines += ["| status | id | check | measured | needs | detail | fix | source |", "|---|---|---|---|---|---|---|---|"]
        for f in shown:
            source = f"[{f.source.title}]({f.source.url}) ({f.source.checked})"
            lines.append(
                "| " + " | ".join(
                    _cell(x)
                    for x in (
                        STATUS_LABEL[f.status], f.id, f.title, measured_text(f.id, f.measured, f.unit), threshold_text(f),
                        f.detail,
                        (f.fix + (f" (Ansible {f.fix_role})" if f.fix_role else "")) if f.status in NEEDS_FIX else "",
                        source,
                    )
                ) + " |"
            )
    lines.append("")
    return "\n".join(lines)
