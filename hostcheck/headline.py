"""The one sentence above the table: can I host this machine, and where, and is it safe for me.

Pure functions of judged policies, the owner-risk rating and the checks' own metadata (which
blockers mean "cannot apply", which owner-risk items say the agent holds root), so the
terminal, Markdown and JSON reports say the same thing.
"""

from __future__ import annotations

import re

from hostcheck.checks import load_registry
from hostcheck.models import (
    UNDECIDED,
    Finding,
    OwnerRiskFinding,
    PolicyResult,
    Severity,
    Status,
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
