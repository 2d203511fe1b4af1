"""The terminal report: the first screen (at most 40 lines at the terminal's width), and with
``--details`` every finding once, with the policies it affects.

The first screen says the report's :class:`~hostcheck.models.Answer` (built once beside the
report): headline, policy table, owner risk, what to do in order, what could not be judged.
Lines are wrapped to the terminal's width (:mod:`hostcheck.render.terminal`), never padded.
"""

from __future__ import annotations

from hostcheck.headline import cannot_apply_line
from hostcheck.models import UNDECIDED, Finding, Level, PolicyResult, Rating, Report, Status, UnknownGroup
from hostcheck.render.terminal import terminal_width, wrap
from hostcheck.render.text import (
    NEEDS_FIX,
    STATUS_LABEL,
    VERDICT_MARK,
    finding_line,
    findings_once,
    ids_text,
    policy_counts,
    risk_row_text,
    step_text,
    unknown_text,
    where_text,
)
from hostcheck.rules_age import stale_line
from hostcheck.wording import counted

SCREEN_LINES = 23  # an 80x24 terminal with the prompt: the answer never scrolls off
MAX_HEADLINE_LINES = 3
MAX_RISK_LINES = 2
MAX_CANNOT_LINES = 2
MAX_CAUSE_LINES = 2
DETAILS = "hostcheck audit --details"
PLAN_HEAD = "What to do, in order (roles of the Ansible host profile: docs/roles.md):"


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
    if not shown:  # every policy asked for cannot apply: the line below says so, no empty table
        return []
    rows = [("policy", "verdict", "score", "blockers/risks/unknown")]
    rows += [(p.id, VERDICT_MARK[p.verdict], str(p.score), policy_counts(p)) for p in shown]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for row in rows:
        text = "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        lines += wrap(text, width)
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


def _cannot(report: Report, width: int, whole: bool) -> list[str]:
    """The policies that cannot apply, with their reasons when that fits two lines, else by name
    (the reasons are in ``--details``'s policy list)."""
    cannot = cannot_apply_line(report.policies)
    if not cannot:
        return []
    lines = wrap(cannot, width)
    if whole or len(lines) <= MAX_CANNOT_LINES:
        return lines
    names = ", ".join(p.id for p in report.policies if not p.applicable)
    return wrap(f"Cannot apply: {names} (why: in the details).", width)


def _rating_only(owner_risk: str, width: int) -> list[str]:
    """The owner-risk line cut to its rating (before the first ": " or ";"), its causes left to
    the details."""
    return wrap(owner_risk.split(": ", 1)[0].split(";")[0] + f" (its causes: `{DETAILS}`).", width)


def _short_cause(group: UnknownGroup, width: int) -> list[str]:
    """A cause in at most two lines: its evidence (a CGNAT path, a list of files) is for ``--details``."""
    lines = wrap(unknown_text(group), width, first="- ", indent="  ")
    if len(lines) <= MAX_CAUSE_LINES:
        return lines
    words = group.cause.split()
    while True:
        lines = wrap(f"{' '.join(words)} ...: {counted(len(group.checks), 'check')} ({ids_text(group.checks)})",
                     width, first="- ", indent="  ")
        if len(lines) <= MAX_CAUSE_LINES or not words:
            return lines
        words.pop()


def first_screen(report: Report, width: int, limit: int | None = SCREEN_LINES) -> list[str]:
    """The answer, in at most ``limit`` lines (None: every step, and the causes left to
    :func:`details`, which lists each with its checks). First what never scrolls off: the
    headline, the table and the owner risk; then the steps; then what could not be judged,
    cause by cause where there is room, else in one line."""
    answer = report.answer
    host = report.host.hostname or "this host"
    # The version and host name head the details; the first screen starts with the answer.
    top = wrap(f"hostcheck {report.tool.version} — {host}", width)[:1] if limit is None else []
    headline, _ = _sentences(answer.headline, width, MAX_HEADLINE_LINES if limit is not None else 10**6)
    said = " ".join(answer.headline)
    risk = wrap(answer.owner_risk, width)
    if len(risk) > MAX_RISK_LINES:
        risk = _rating_only(answer.owner_risk, width)
    if report.owner_risk.rating == Rating.HIGH and all(r.note in said for r in report.owner_risk.findings
                                                       if r.status == Status.WARN and r.level == Level.HIGH):
        risk = []  # the headline said it: owner risk HIGH, and why
    table = _table(report, width)
    stale = stale_line(report.rules_read, report.generated_at)
    fixed = [*top, *headline, *(wrap(stale, width) if stale else []), *([""] + table if table else []), *_cannot(report, width, limit is None), *([""] + risk if risk else [])]
    read = f" Platform rules read {report.rules_read}." if report.rules_read and not stale else ""
    tail = ["", *wrap(f"Details: `{DETAILS}`; one check: `hostcheck explain ID`.{read}", width)] \
        if limit is not None else (["", *wrap(read.strip(), width)] if read else [])
    room = (10**6 if limit is None else limit) - len(fixed) - len(tail)

    seen = set(fixed)
    steps = [_numbered(n, step_text(s), width, seen) for n, s in enumerate(answer.plan, 1)]
    note = wrap(answer.plan_note, width) if answer.plan_note else []
    plan: list[str] = []
    if steps or note:
        plan = ["", *wrap(PLAN_HEAD if any(s.role for s in answer.plan) else "What to do, in order:", width)]
    count = sum(len(g.checks) for g in answer.unknowns)
    summary: list[str] = []
    if answer.unknowns:
        biggest = answer.unknowns[0]
        summary = ["", *wrap(f"Not judged: {counted(count, 'check')}, for {counted(len(answer.unknowns), 'cause')}; "
                             f"the largest, {len(biggest.checks)}: {biggest.cause.split(':')[0]}.", width)]
        if limit is not None and len(summary) > 3:
            summary = ["", *wrap(f"Not judged: {counted(count, 'check')}, for {counted(len(answer.unknowns), 'cause')}.",
                                 width)]
    if limit is None:
        summary = ["", f"Not judged: {counted(count, 'check')}, by cause below."] if answer.unknowns else []
    room -= len(plan) + len(note) + len(summary)
    shown_steps: list[str] = []
    for number, block in enumerate(steps):
        more = 1 if number + 1 < len(steps) else 0
        if len(block) + more > room and shown_steps:
            break
        shown_steps += block
        room -= len(block)
    left = len(steps) - sum(1 for block in steps if block[0] in shown_steps)
    if left:
        later = f"; {len(answer.later)} more once owner risk is lower" if answer.later else ""
        shown_steps += wrap(f"... and {counted(left, 'more step')}{later}", width, first="    ", indent="    ")
        room -= 1
        if later:
            room += len(note)
            note = []
    unknown = summary
    if limit is not None and answer.unknowns:
        # Cause by cause when at least two fit (with "N more" under them), else the summary.
        room += len(summary)
        blocks = [_short_cause(g, width) for g in answer.unknowns]
        taken: list[str] = []
        header = ["", f"Not judged ({counted(count, 'check')}), by cause:"]
        budget = room - len(header)
        for number, block in enumerate(blocks):
            more = 1 if number + 1 < len(blocks) else 0
            if len(block) + more > budget:
                break
            taken += block
            budget -= len(block)
        shown = sum(1 for block in blocks if block[0] in taken)
        if shown >= min(2, len(blocks)):
            if shown < len(blocks):
                taken += wrap(f"... and {counted(len(blocks) - shown, 'more cause')}", width, first="- ", indent="  ")
            unknown = header + taken
    lines = fixed + plan + shown_steps + note + unknown + tail
    if limit is None or len(lines) <= limit:
        return lines
    # Still too long (a long first step, a wide table): give up the spacing and the shorter
    # forms' extras, then the steps after the first, never the answer.
    short = [f"Not judged: {counted(count, 'check')}, for {counted(len(answer.unknowns), 'cause')}."] \
        if answer.unknowns else []
    for squeeze in range(7):
        if squeeze == 0:
            unknown = short
        elif squeeze == 1:
            tail = tail[1:]
        elif squeeze == 2 and len(steps) > 1 and shown_steps:
            first = steps[0]
            shown_steps = first + wrap(f"... and {counted(len(steps) - 1, 'more step')}", width, first="    ",
                                       indent="    ")
        elif squeeze == 3 and risk and report.owner_risk.rating == Rating.HIGH:  # the headline says HIGH, and why
            fixed = fixed[: len(fixed) - len(risk) - 1]
            risk = []
        elif squeeze == 4 and len(risk) > 1:  # the rating, its causes in the details
            cut = _rating_only(answer.owner_risk, width)
            if len(cut) < len(risk):
                fixed = fixed[: len(fixed) - len(risk)] + cut
                risk = cut
        elif squeeze == 5 and plan[:1] == [""]:
            plan = plan[1:]
        elif squeeze == 6:
            note = []
        lines = fixed + plan + shown_steps + note + unknown + tail
        if len(lines) <= limit:
            break
    if len(lines) > limit:  # never reached by a shipped shape; the answer (the top) is what stays
        lines = lines[:limit]
    return lines


def details(report: Report, width: int) -> list[str]:
    """Every finding once (worst status first), with the policies it affects: those not judged
    under their cause, said once; then the steps held back, then the owner-risk items, those
    listed above by id only."""
    answer = report.answer
    lines = ["", "Policies:"]
    for policy in report.policies:
        lines += wrap(f"{policy.id}: {policy.title} — {VERDICT_MARK[policy.verdict]}, {policy.score}/100. "
                      f"{policy.summary}", width, first="", indent="    ")
    if answer.later:
        lines += ["", *wrap("Steps that come once owner risk is lower, in order:", width)]
        for number, step in enumerate(answer.later, len(answer.plan) + 1):
            lines += _numbered(number, step_text(step), width)
    cause_of = {check_id: group for group in answer.unknowns for check_id in group.checks}
    undecided: dict[str, list[tuple[Finding, list[tuple[PolicyResult, Finding]]]]] = {}
    lines += ["", "Every finding, once (with the policies it affects):"]
    shown: set[str] = set()
    for worst, uses in findings_once(report):
        shown.add(worst.id)
        group = cause_of.get(worst.id)
        if worst.status in UNDECIDED and group is not None:
            undecided.setdefault(group.cause, []).append((worst, uses))
            continue
        label = STATUS_LABEL[worst.status]
        text = f"{label} {worst.id} {finding_line(worst.id, worst.status, worst.measured, None, worst.detail)}"
        lines += wrap(text, width, first="", indent="    ")
        lines += wrap(where_text(uses), width, first="    in: ", indent="    ")
        if worst.status in NEEDS_FIX:
            role = f" [Ansible {worst.fix_role}]" if worst.fix_role else ""
            lines += wrap(worst.fix + role, width, first="    fix: ", indent="    ")
    risk = report.owner_risk
    unseen_rows = {row.id: row for row in risk.findings if row.status in UNDECIDED and row.id not in shown}
    if undecided or unseen_rows:
        lines += ["", "Not judged, by cause (each check once):"]
    for group in answer.unknowns:
        held = undecided.get(group.cause, [])
        rows = [unseen_rows[c] for c in group.checks if c in unseen_rows]
        if not held and not rows:
            continue
        lines += wrap(group.cause + (f"; {group.then}" if group.then else ""), width, first="- ", indent="  ")
        for worst, uses in held:
            meta_line = finding_line(worst.id, Status.PASS, None, None, "")
            lines += wrap(f"{worst.id} {meta_line}; in: {where_text(uses)}", width, first="    ", indent="      ")
        for row in rows:
            lines += wrap(f"{row.id} {finding_line(row.id, Status.PASS, None)} (owner risk, {row.level})", width,
                          first="    ", indent="      ")
    # The rating's reasons are the items below and the finding lines above: said once, there.
    lines += ["", f"Owner risk {risk.rating.upper()}, item by item:"]
    for row in risk.findings:
        label = row.level.upper() if row.status.value == "warn" else STATUS_LABEL[row.status]
        if row.id in shown or row.id in unseen_rows:
            lines += wrap(f"{label} {row.id} (above): {row.title}", width, first="", indent="    ")
        else:
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
