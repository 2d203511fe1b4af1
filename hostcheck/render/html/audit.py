"""The audit report as HTML: the answer first, as on the terminal (headline, platforms, owner
risk, the plan, what was not judged), then the summaries by platform and by severity, then
every finding once, grouped and sorted by severity, each with what was measured, what each
policy requires, the fix and its source."""

from __future__ import annotations

from collections import Counter

from hostcheck.headline import cannot_apply_line
from hostcheck.models import Report, Status, Verdict
from hostcheck.render.html.markup import Markup, el, link
from hostcheck.render.html.page import fold, header_card, section, table, tag
from hostcheck.render.text import (
    NEEDS_FIX,
    STATUS_LABEL,
    VERDICT_MARK,
    finding_line,
    findings_once,
    measured_text,
    risk_row_text,
    step_text,
    unknown_text,
    where_text,
)
from hostcheck.report import STATUS_ORDER

HOSTABLE = (Verdict.FEASIBLE, Verdict.FEASIBLE_WITH_RISKS)


def rules_read(report: Report) -> str:
    """The latest date on which a source the findings cite was read."""
    dates = [f.source.checked for p in report.policies for f in p.findings if f.source.checked]
    return max(dates, default="unknown")


def audit_header(report: Report, command: str) -> Markup:
    host = report.host.hostname or "this host"
    rows = [("hostcheck", report.tool.version), ("command", command or "hostcheck audit"),
            ("generated", report.generated_at), ("rules read", f"up to {rules_read(report)}")]
    if report.redacted:
        rows.append(("redacted", "yes: addresses, serials, host and user names replaced"))
    return header_card(f"hostcheck report — {host}", rows)


def answer_sections(report: Report) -> list[Markup]:
    """The terminal's first screen: the headline, the platforms' verdicts, owner risk, the plan,
    the causes of what was not judged."""
    answer = report.answer
    applicable = [p for p in report.policies if p.applicable]
    good = report.owner_risk.rating == "low" and any(p.verdict in HOSTABLE for p in applicable)
    out = [el("p", " ".join(answer.headline), class_="answer good" if good else "answer")]
    rows = [[p.id, f"{len(p.blockers)} / {len(p.risks)} / {len(p.unknowns)}",
             [tag(VERDICT_MARK[p.verdict], p.verdict), f" {p.score}/100"]] for p in applicable]
    platforms = [table(["policy", "blockers / risks / unknown", "verdict, score"], rows, last_wide=True)]
    cannot = cannot_apply_line(report.policies)
    if cannot:
        platforms.append(el("p", cannot))
    out.append(section("Summary by platform", platforms, id_="platforms"))
    out.append(el("p", el("strong", "Owner risk: "), tag(report.owner_risk.rating.upper()), " ", answer.owner_risk))
    if answer.plan or answer.plan_note:
        out.append(section("What to do, in order", el("ol", [el("li", step_text(s)) for s in answer.plan]),
                           el("p", answer.plan_note) if answer.plan_note else None, id_="plan"))
    if answer.unknowns:
        out.append(section("Not judged, by cause", el("ul", [el("li", unknown_text(g)) for g in answer.unknowns])))
    return out


def severity_summary(report: Report) -> Markup:
    counts = Counter(worst.status for worst, _ in findings_once(report))
    order = sorted(counts, key=lambda s: STATUS_ORDER[s])
    return section("Summary by severity", table(["severity", "checks"],
                                                [[tag(STATUS_LABEL[s]), str(counts[s])] for s in order]), id_="severity")


def findings_section(report: Report) -> Markup:
    """Every check judged, once, grouped by its worst status; blockers and risks open."""
    groups: dict[Status, list[Markup]] = {}
    for worst, uses in findings_once(report):
        line = finding_line(worst.id, worst.status, worst.measured, None, worst.detail)
        measured = measured_text(worst.id, worst.measured, worst.unit)
        rows: list[tuple[str, object]] = [("found", measured or worst.detail or "not measured"),
                                          ("required by", where_text(uses)), ("why", worst.why)]
        if worst.status in NEEDS_FIX:
            rows.append(("fix", worst.fix + (f" (Ansible {worst.fix_role})" if worst.fix_role else "")))
        rows.append(("source", [link(worst.source.url, worst.source.title), f" (read {worst.source.checked})"]))
        item = fold([tag(STATUS_LABEL[worst.status]), " ", el("span", worst.id), " ", line],
                    el("dl", [[el("dt", k), el("dd", v)] for k, v in rows]))  # type: ignore[arg-type]
        groups.setdefault(worst.status, []).append(item)
    parts = []
    for status in sorted(groups, key=lambda s: STATUS_ORDER[s]):
        items = groups[status]
        label = f"{STATUS_LABEL[status]}: {len(items)} check{'s' if len(items) != 1 else ''}"
        parts.append(el("h3", label))
        parts.extend(items)
    return section("Every finding, once, by severity", parts, id_="findings")


def owner_risk_section(report: Report) -> Markup:
    risk = report.owner_risk
    rows = [el("li", tag(str(row.level if row.status == Status.WARN else row.status).upper()), " ", risk_row_text(row),
               " — ", link(row.source.url, row.source.title)) for row in risk.findings]
    return section(f"Owner risk: {risk.rating.upper()}", el("p", risk.statement), el("ul", rows), id_="risk-to-you")


def policies_section(report: Report) -> Markup:
    return fold("Policies judged", el("ul", [el("li", el("strong", p.id), f": {p.title} — {VERDICT_MARK[p.verdict]}, "
                                                  f"{p.score}/100. {p.summary}") for p in report.policies]))


def audit_body(report: Report, earnings_lines: list[str] | None = None) -> list[Markup]:
    body = [*answer_sections(report)]
    if earnings_lines:
        body.append(section("Earnings", el("ul", [el("li", line) for line in earnings_lines])))
    body += [severity_summary(report), findings_section(report), owner_risk_section(report), policies_section(report)]
    return body
