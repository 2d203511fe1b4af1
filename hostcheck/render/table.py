"""The terminal report (rich): verdicts first, then per policy blockers, risks, unknowns."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hostcheck.headline import cannot_apply_line
from hostcheck.models import UNDECIDED, Rating, Report, Status, Verdict
from hostcheck.render.text import (
    NEEDS_FIX,
    STATUS_LABEL,
    VERDICT_MARK,
    grouped_unknowns,
    headline,
    needs_attention,
    risk_row_text,
)

VERDICT_STYLE: dict[Verdict, str] = {
    Verdict.FEASIBLE: "bold green",
    Verdict.FEASIBLE_WITH_RISKS: "bold yellow",
    Verdict.NOT_FEASIBLE: "bold red",
    Verdict.UNDETERMINED: "bold magenta",
}
STATUS_STYLE: dict[Status, str] = {
    Status.FAIL: "red", Status.WARN: "yellow", Status.UNKNOWN: "magenta", Status.ERROR: "bold red",
    Status.PASS: "green", Status.SKIPPED: "dim",
}
RISK_STYLE: dict[Rating, str] = {Rating.HIGH: "bold red", Rating.MEDIUM: "bold yellow", Rating.LOW: "bold green", Rating.UNKNOWN: "bold magenta"}


def _grid() -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=8, no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def render_table(report: Report, *, verbose: bool = False, color: bool = False) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=100, force_terminal=color, no_color=not color, highlight=False)
    host = report.host.hostname or "this host"
    console.print(Text(f"hostcheck {report.tool.version} — {host}", style="bold"))
    console.print(Text(report.headline, style="bold"))

    summary = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("policy", "verdict", "score", "blockers", "risks", "unknown"):
        summary.add_column(column)
    for policy in report.policies:
        summary.add_row(
            Text(policy.id),  # a str cell would be parsed as rich markup
            Text(VERDICT_MARK[policy.verdict], style=VERDICT_STYLE[policy.verdict]),
            str(policy.score),
            str(len(policy.blockers)),
            str(len(policy.risks)),
            str(len(policy.unknowns)),
        )
    console.print(summary)

    risk = report.owner_risk
    console.print()
    console.print(Text.assemble(("Owner risk: ", "bold"), (risk.rating.upper(), RISK_STYLE[risk.rating])))
    console.print(risk.statement, markup=False)
    grid = _grid()
    for row in risk.findings:
        if row.status in (Status.WARN, *UNDECIDED):
            label = row.level.upper() if row.status == Status.WARN else row.status.upper()
            grid.add_row(Text(label, style=STATUS_STYLE[row.status]), Text(risk_row_text(row)))
    console.print(grid)

    cannot = cannot_apply_line(report.policies)
    for policy in report.policies:
        if not verbose and not policy.applicable:
            continue  # said once, on the "cannot apply" line below
        console.print()
        console.print(
            Text.assemble(
                (policy.title, "bold"),
                "  ",
                (VERDICT_MARK[policy.verdict], VERDICT_STYLE[policy.verdict]),
                f"  score {policy.score}/100",
            )
        )
        grid = _grid()
        for finding in policy.findings:
            if finding.status in UNDECIDED or not (verbose or needs_attention(finding)):
                continue
            body = Text(headline(finding), style="bold" if finding.status == Status.FAIL else "")
            if finding.detail:
                body.append(f"\n{finding.detail}")
            if finding.status in NEEDS_FIX:
                body.append(f"\nfix: {finding.fix}")
                if finding.fix_role:
                    body.append(f" [Ansible {finding.fix_role}]", style="dim")
            grid.add_row(Text(STATUS_LABEL[finding.status], style=STATUS_STYLE[finding.status]), body)
        for status, ids, reason in grouped_unknowns(policy.findings):
            grid.add_row(Text(STATUS_LABEL[status], style=STATUS_STYLE[status]), Text(f"{', '.join(ids)}\n{reason}"))
        console.print(grid)
        met = sum(1 for f in policy.findings if f.status == Status.PASS)
        if met and not verbose:
            console.print(Text(f"         {met} requirement(s) met (--verbose lists them)", style="dim"))
    if cannot and not verbose:
        console.print()
        console.print(Text(cannot + " (--verbose shows their blockers)"))
    console.print()
    console.print(Text("`hostcheck explain ID` tells why a check matters, its source and how to fix it.", style="dim"))
    return buffer.getvalue()
