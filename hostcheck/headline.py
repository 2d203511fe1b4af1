"""The one sentence above the table: can I host this machine, and where, and is it safe for me.

Pure functions of judged policies, the owner-risk rating and the checks' own metadata (which
blockers mean "cannot apply", which owner-risk items say the agent holds root), so the
terminal, Markdown and JSON reports say the same thing.
"""

from __future__ import annotations

import re

from hostcheck.checks import load_registry
from hostcheck.models import (
    FEASIBLE,
    OWNER_RISK_STOPS,
    UNDECIDED,
    Finding,
    Level,
    OwnerRiskFinding,
    PolicyKind,
    PolicyResult,
    Rating,
    Severity,
    Status,
    Verdict,
)


def agent_root_rows(rows: list[OwnerRiskFinding]) -> list[OwnerRiskFinding]:
    """The failing owner-risk rows that say the agent holds root (their checks'
    ``says_agent_has_root``), less those a failing row supersedes."""
    registry = load_registry()
    warned = {r.id for r in rows if r.status == Status.WARN}
    return [r for r in rows if r.id in warned and registry[r.id].says_agent_has_root
            and registry[r.id].superseded_by not in warned]


_COMMAND = re.compile(r"`((?:sudo )?hostcheck [^`]+)`")


def applicability(findings: list[Finding]) -> str:
    """Why a policy cannot apply to this machine ('' when it can): its failed preconditions."""
    registry = load_registry()
    reasons = []
    for finding in findings:
        precondition = registry[finding.id].precondition
        if finding.status == Status.FAIL and precondition:
            threshold = finding.threshold
            shown = " or ".join(map(str, threshold)) if isinstance(threshold, list) else str(threshold)
            reasons.append(precondition.format(threshold=shown))
    return "; ".join(reasons)


def _names(policies: list[PolicyResult]) -> str:
    return ", ".join(p.id for p in policies)


def next_commands(policies: list[PolicyResult]) -> list[str]:
    """Commands that can settle the unknown blockers of undetermined policies, taken from each
    unknown finding's own fix text (so a new check that names its command is picked up)."""
    commands: list[str] = []
    for policy in policies:
        for finding in policy.findings:
            if finding.severity != Severity.BLOCKER or finding.status not in UNDECIDED:
                continue
            for command in _COMMAND.findall(finding.fix):
                if command not in commands:
                    commands.append(command)
    return commands


def cannot_apply_line(policies: list[PolicyResult]) -> str:
    """'Cannot apply to this machine: runpod (closed to new hosts); darkbloom (...)' or ''."""
    out = [f"{p.id} ({p.precondition})" for p in policies if not p.applicable]
    return f"Cannot apply to this machine: {'; '.join(out)}." if out else ""


def headline(policies: list[PolicyResult], rating: Rating, risk_rows: list[OwnerRiskFinding]) -> str:
    """One sentence (two at most) that answers "can I host this machine, and where?"."""
    platforms = [p for p in policies if p.kind == PolicyKind.PLATFORM] or list(policies)
    feasible = [p for p in platforms if p.verdict in FEASIBLE]
    clean = [p for p in feasible if p.verdict == Verdict.FEASIBLE]
    risky = [p for p in feasible if p.verdict == Verdict.FEASIBLE_WITH_RISKS]
    undetermined = [p for p in platforms if p.verdict == Verdict.UNDETERMINED]

    where = []
    if clean:
        where.append(f"{_names(clean)} (feasible)")
    if risky:
        where.append(f"{_names(risky)} (feasible with risks)")
    where_text = " and ".join(where)
    then = ""
    if undetermined:
        steps: dict[str, list[str]] = {}
        for policy in undetermined:
            commands = next_commands([policy])
            step = f"run `{commands[0]}`" if commands else "see the UNKNOWN items below"
            steps.setdefault(step, []).append(policy.id)
        said = "; ".join(f"{', '.join(ids)}: {step}" for step, ids in steps.items())
        then = f" Undetermined until unknown blockers are settled: {said}."

    if rating in OWNER_RISK_STOPS:
        rooted = {r.id for r in agent_root_rows(risk_rows)}
        failing = [r.note or r.title for r in risk_rows
                   if (r.status == Status.WARN and r.level == Level.HIGH) or r.id in rooted]
        if rating == Rating.HIGH:
            why = f"owner risk is HIGH ({'; '.join(failing)})" if failing else "owner risk is HIGH"
        else:
            why = "owner risk is UNKNOWN: hostcheck could not see enough to rate your own exposure"
        lead = f"Do not host on this machine as it is: {why}."
        if feasible:
            return f"{lead} Only once that is fixed: {where_text} would accept it.{then}"
        return f"{lead} No platform would accept it as it is either.{then}"
    agent_root = [r.note or r.title for r in agent_root_rows(risk_rows)]
    risk_text = f"owner risk {rating.upper()}" + (f" ({'; '.join(agent_root)})" if rating == Rating.MEDIUM and agent_root else "")
    if feasible:
        return f"Yes, you can host this machine on {where_text}; {risk_text}.{then}"
    if undetermined:
        return f"Not yet known: no platform is feasible for sure; {risk_text}.{then}"
    return f"No: no platform accepts this machine as it is (the blockers are listed below); {risk_text}."
