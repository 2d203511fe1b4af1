"""The terminal report: the first screen (at most 40 lines at the terminal's width), and with
``--details`` every finding once, with the policies it affects.

The first screen says the report's :class:`~hostcheck.models.Answer` (built once beside the
report): headline, policy table, owner risk, what to do in order, what could not be judged.
Lines are wrapped to the terminal's width (:mod:`hostcheck.render.terminal`), never padded.
"""

from __future__ import annotations

from hostcheck.headline import cannot_apply_line
from hostcheck.models import Report
from hostcheck.render.terminal import terminal_width, wrap
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
from hostcheck.wording import counted

SCREEN_LINES = 40
MAX_HEADLINE_LINES = 3
MAX_RISK_LINES = 2
DETAILS = "hostcheck audit --details"


def _sentences(sentences: list[str], width: int, limit: int) -> tuple[list[str], int]:
    """As many whole sentences as fit in ``limit`` wrapped lines, and how many were left out."""
    lines: list[str] = []
    for number, _ in enumerate(sentences):
        candidate = wrap(" ".join(sentences[: number + 1]), width)
        if len(candidate) > limit:
            return lines or candidate[:limit], len(sentences) - number
        lines = candidate
    return lines, 0


def _table(report: Report, width: int) -> list[str]:
    shown = [p for p in report.policies if p.applicable]
    rows = [("policy", "verdict", "score", "blockers/risks/unknown")]
    rows += [(p.id, VERDICT_MARK[p.verdict], str(p.score), policy_counts(p)) for p in shown]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for row in rows:
        text = "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        lines += wrap(text, width)
    cannot = cannot_apply_line(report.policies)
    if cannot:
        lines += wrap(cannot, width)
    return lines


def _numbered(number: int, text: str, width: int, seen: set[str] | None = None) -> list[str]:
    head = f"{number:2}. "
    return _unique(text, width, seen if seen is not None else set(), first=head, indent=" " * len(head))


def _unique(text: str, width: int, seen: set[str], *, first: str, indent: str) -> list[str]:
    """``text`` wrapped so that none of its lines repeats one already on the screen (two steps
    that end alike would wrap to the same last line): a little narrower where it would."""
    lines = wrap(text, width, first=first, indent=indent)
    for narrower in range(width - 1, max(width - 16, 20), -1):
        if not seen.intersection(line for line in lines if line.strip()):
            break
        lines = wrap(text, narrower, first=first, indent=indent)
    seen.update(lines)
    return lines


def first_screen(report: Report, width: int, limit: int | None = SCREEN_LINES) -> list[str]:
    """The answer, in at most ``limit`` lines (None: every step and cause)."""
    answer = report.answer
    host = report.host.hostname or "this host"
    top = wrap(f"hostcheck {report.tool.version} — {host}", width)[:1]
    headline, _ = _sentences(answer.headline, width, MAX_HEADLINE_LINES)
    risk = wrap(answer.owner_risk, width)
    if len(risk) > MAX_RISK_LINES:
        risk = wrap(answer.owner_risk.split(": ", 1)[0].split(";")[0] + f" (its causes: `{DETAILS}`).", width)
    stale = stale_line(report.rules_read, report.generated_at)
    fixed = [*top, *headline, *(wrap(stale, width) if stale else []), "", *_table(report, width), "", *risk]
    read = f" Platform rules read {report.rules_read}." if report.rules_read and not stale else ""
    tail = ["", *wrap(f"`{DETAILS}` lists every finding once; `hostcheck explain ID` says why a check "
                      f"matters and how to fix it.{read}", width)]
    room = (10**6 if limit is None else limit) - len(fixed) - len(tail)

    plan_lines: list[str] = []
    if answer.plan or answer.plan_note:
        plan_lines = ["", "What to do, in order:"]
    unknown_lines: list[str] = []
    if answer.unknowns:
        count = sum(len(g.checks) for g in answer.unknowns)
        unknown_lines = ["", f"Not judged ({counted(count, 'check')}), by cause:"]
    note = wrap(answer.plan_note, width) if answer.plan_note else []
    room -= len(plan_lines) + len(unknown_lines) + len(note)

    # Steps first (at least three when there are), then the unknowns, then the rest of the steps.
    seen = set(fixed)
    steps = [_numbered(n, step_text(s), width, seen) for n, s in enumerate(answer.plan, 1)]
    groups = [_unique(unknown_text(g), width, seen, first="- ", indent="  ") for g in answer.unknowns]
    chosen_steps: list[list[str]] = []
    chosen_groups: list[list[str]] = []

    def take(pool: list[list[str]], into: list[list[str]], upto: int, reserve: int) -> None:
        nonlocal room
        while pool and len(into) < upto:
            more = 1 if len(pool) > 1 else 0  # the "N more" line
            if len(pool[0]) + more + reserve > room:
                break
            room -= len(pool[0])
            into.append(pool.pop(0))

    reserve_groups = 1 if groups else 0
    take(steps, chosen_steps, 3, reserve_groups + (1 if groups else 0))
    take(groups, chosen_groups, len(groups), 1 if steps else 0)
    take(steps, chosen_steps, len(steps) + len(chosen_steps), 1 if groups else 0)
    if steps:
        chosen_steps.append(wrap(f"... {len(steps)} more step(s): {DETAILS}", width, indent="    ", first="    "))
    if groups:
        chosen_groups.append(wrap(f"... {len(groups)} more cause(s): {DETAILS}", width, first="- ", indent="  "))
    lines = fixed
    if plan_lines:
        lines += plan_lines + [line for block in chosen_steps for line in block] + note
    if unknown_lines:
        lines += unknown_lines + [line for block in chosen_groups for line in block]
    return lines + tail


def details(report: Report, width: int) -> list[str]:
    """Every finding once (worst status first), with the policies it affects, then the owner-risk rows."""
    lines = ["", "Policies:"]
    for policy in report.policies:
        lines += wrap(f"{policy.id}: {policy.title} — {VERDICT_MARK[policy.verdict]}, {policy.score}/100. "
                      f"{policy.summary}", width, first="", indent="    ")
    lines += ["", "Every finding, once (with the policies it affects):"]
    for worst, uses in findings_once(report):
        label = STATUS_LABEL[worst.status]
        text = f"{label} {worst.id} {finding_line(worst.id, worst.status, worst.measured, None, worst.detail)}"
        lines += wrap(text, width, first="", indent="    ")
        lines += wrap(where_text(uses), width, first="    in: ", indent="    ")
        if worst.status in NEEDS_FIX:
            role = f" [Ansible {worst.fix_role}]" if worst.fix_role else ""
            lines += wrap(worst.fix + role, width, first="    fix: ", indent="    ")
    risk = report.owner_risk
    lines += ["", *wrap(f"Owner risk {risk.rating.upper()}: {risk.statement}", width)]
    for row in risk.findings:
        label = row.level.upper() if row.status.value == "warn" else STATUS_LABEL[row.status]
        lines += wrap(f"{label} {risk_row_text(row)}", width, first="", indent="    ")
    return lines


def render_table(report: Report, *, verbose: bool = False, color: bool = False, width: int | None = None) -> str:
    """The first screen, and with ``verbose`` (``--details``) everything behind it. ``color`` is
    accepted for the callers' sake: the text is plain, so a pipe and a terminal read the same."""
    width = terminal_width() if width is None else width
    lines = first_screen(report, width, None if verbose else SCREEN_LINES)
    if verbose:
        lines += details(report, width)
    return "\n".join(line.rstrip() for line in lines) + "\n"
