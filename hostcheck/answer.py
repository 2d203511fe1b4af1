"""The answer on the first screen: the headline, the owner-risk line, what to do in order, and
what could not be judged, grouped by cause.

Built once, beside the report, from the judged policies and the owner-risk rows; carried in
the report (JSON) so the terminal and Markdown render the same answer and none recomputes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hostcheck.checks import load_registry
from hostcheck.checks.base import id_of
from hostcheck.checks.gpu import gpu_present, no_nvidia_hardware
from hostcheck.headline import agent_root_rows, next_commands
from hostcheck.models import (
    FEASIBLE,
    OWNER_RISK_STOPS,
    UNDECIDED,
    Answer,
    Finding,
    Level,
    OwnerRisk,
    OwnerRiskFinding,
    PlanStep,
    PolicyKind,
    PolicyResult,
    Rating,
    Severity,
    Status,
    UnknownGroup,
    Verdict,
)
from hostcheck.wording import counted

LEVEL_RANK = {level: rank for rank, level in enumerate(Level)}
NEEDS_FIX = (Status.FAIL, Status.WARN)
_PATH_PREFIX = re.compile(r"^[a-z_][a-z0-9_.*\[\]]*: ")
_COMMAND = re.compile(r"`((?:sudo )?hostcheck [^`]+)`")
SUDO_AUDIT = 'sudo "$(command -v hostcheck)" audit'
"""The audit as root wherever hostcheck was installed: sudo's own PATH lacks ~/.local/bin, where
the README's install puts it, so a bare `sudo hostcheck` is "command not found" there."""
NO_GPU = "no NVIDIA GPU on this machine, so nothing for the NVIDIA driver to read"
CAUSES = (
    (("needs root", "without root"), "reading them needs root", f"run `{SUDO_AUDIT}`"),
    (("not recorded in format",), "the snapshot was saved before hostcheck recorded these facts",
     "collect again with `hostcheck facts`"),
    (("NVML library",), "no NVIDIA driver (NVML library not found)", "install the driver, then run again"),
)
"""Reasons shared by many checks, said as one cause with what settles it."""
MAX_CAUSES_NAMED = 2


def _names(policies: list[PolicyResult]) -> str:
    return ", ".join(p.id for p in policies)


def _causes(notes: list[str]) -> str:
    shown = "; ".join(notes[:MAX_CAUSES_NAMED])
    more = len(notes) - MAX_CAUSES_NAMED
    return shown + (f" (and {more} more)" if more > 0 else "")


SHORT_EVIDENCE = 40
"""An owner-risk item's evidence this short is said beside its note ("...: display manager gdm3
installed"), so a rating that rests on one small fact says which."""


def _said(row: OwnerRiskFinding) -> str:
    note = row.note or row.title
    short = row.status == Status.WARN and row.detail and len(row.detail) <= SHORT_EVIDENCE and ";" not in row.detail
    return f"{note}: {row.detail}" if short else note


def _risk_notes(risk: OwnerRisk, level: Level, statuses: tuple[Status, ...]) -> list[str]:
    return list(dict.fromkeys(_said(r) for r in risk.findings if r.level == level and r.status in statuses))


def owner_risk_line(risk: OwnerRisk) -> str:
    """'Owner risk HIGH: personal credentials on the host; ...' in one sentence."""
    if risk.rating == Rating.UNKNOWN and risk.possibly is not None:
        # The notes: an unseen item's note says what failing would mean, which is what could not
        # be ruled out (its title is the requirement, "No ...", and would read as a double negative).
        unseen = list(dict.fromkeys(r.note or r.title for r in risk.findings
                                    if r.level == risk.possibly and r.status in UNDECIDED))
        return f"Owner risk unknown, possibly {risk.possibly.upper()}; could not rule out: {_causes(unseen)}."
    if risk.rating == Rating.LOW:
        return "Owner risk LOW: nothing personal found exposed; a container escape stays possible, so keep " \
               "nothing you value on this machine."
    failing = _risk_notes(risk, Level(risk.rating.value), (Status.WARN,))
    return f"Owner risk {risk.rating.upper()} because of: {_causes(failing)}."


def _first_obstacle(platforms: list[PolicyResult]) -> str:
    """The blocker that stops most platforms, as its line says it, and how many it stops."""
    registry = load_registry()
    counts: dict[str, list[PolicyResult]] = {}
    findings: dict[str, Finding] = {}
    for policy in platforms:
        for finding in policy.findings:
            if finding.severity == Severity.BLOCKER and finding.status == Status.FAIL:
                counts.setdefault(finding.id, []).append(policy)
                findings.setdefault(finding.id, finding)
    if not counts:
        return ""
    top = sorted(counts, key=lambda cid: (-len(counts[cid]), cid))[0]
    finding = findings[top]
    line = registry[top].line(finding.measured, finding.threshold)
    stopped = counts[top]
    # Named, not counted: the table below also holds policies that are no platform (dedicated-host).
    whom = "every platform that can apply" if len(stopped) == len(platforms) else _names(stopped)
    return f"First obstacle ({whom}): {line.replace('required: ', 'required ', 1)}."


def _settle(undetermined: list[PolicyResult]) -> str:
    """'Undetermined until unknown blockers are settled: quickpod: run `hostcheck audit --probe ...`.'"""
    if not undetermined:
        return ""
    steps: dict[str, list[str]] = {}
    for policy in undetermined:
        commands = next_commands([policy])
        step = f"run `{commands[0]}`" if commands else "see what could not be judged, by cause, in `hostcheck audit --details`"
        steps.setdefault(step, []).append(policy.id)
    said = "; ".join(f"{', '.join(ids)}: {step}" for step, ids in steps.items())
    return f"Undetermined until unknown blockers are settled: {said}."


def _headline(policies: list[PolicyResult], risk: OwnerRisk) -> list[str]:
    sentences = _verdict_sentences(policies, risk)
    undetermined = [p for p in policies if p.kind == PolicyKind.PLATFORM and p.applicable
                    and p.verdict == Verdict.UNDETERMINED]
    return [s for s in (*sentences, _settle(undetermined)) if s]


def _verdict_sentences(policies: list[PolicyResult], risk: OwnerRisk) -> list[str]:
    platforms = [p for p in policies if p.kind == PolicyKind.PLATFORM] or list(policies)
    applicable = [p for p in platforms if p.applicable]
    feasible = [p for p in applicable if p.verdict in FEASIBLE]
    clean = [p for p in feasible if p.verdict == Verdict.FEASIBLE]
    risky = [p for p in feasible if p.verdict == Verdict.FEASIBLE_WITH_RISKS]
    undetermined = [p for p in applicable if p.verdict == Verdict.UNDETERMINED]
    where = " and ".join(text for text in (
        f"{_names(clean)} (feasible)" if clean else "",
        f"{_names(risky)} (feasible with risks)" if risky else "") if text)

    if risk.rating in OWNER_RISK_STOPS:
        if risk.rating == Rating.HIGH:
            # The first HIGH item, and always the agent's root: installing it is the owner's decision.
            registry = load_registry()
            rooted = {r.id for r in agent_root_rows(risk.findings)}
            rooted |= {m.superseded_by for m in registry.values() if m.says_agent_has_root and m.superseded_by}
            named = _risk_notes(risk, Level.HIGH, (Status.WARN,))[:1]
            named += [r.note or r.title for r in risk.findings if r.status == Status.WARN and r.id in rooted]
            lead = [f"Do not host on this machine as it is: owner risk HIGH ({'; '.join(dict.fromkeys(named))})."]
        else:
            agent = "".join(f"; {r.note or r.title}" for r in agent_root_rows(risk.findings))
            lead = [f"Do not host on this machine until its owner risk is known (possibly "
                    f"{(risk.possibly or Level.HIGH).upper()}; what could not be seen is below{agent})."]
        if feasible:
            once = "Only once that is fixed" if risk.rating == Rating.HIGH else "Once it is known and low enough"
            lead.append(f"{once}: {where} would accept it.")
        elif not applicable:
            lead.append("No platform here can use this machine either.")
        else:
            lead.append(_first_obstacle(applicable) or "No platform is feasible for sure either.")
        return lead
    agent_root = [r.note or r.title for r in agent_root_rows(risk.findings)]
    risk_text = f"owner risk {risk.rating.upper()}" + (
        f" ({'; '.join(agent_root)})" if risk.rating == Rating.MEDIUM and agent_root else "")
    if feasible:
        return [f"Yes, you can host this machine on {where}; {risk_text}."]
    if not applicable:
        # Platforms of one provider often share their precondition: say each once.
        reasons = dict.fromkeys(p.precondition for p in platforms)
        return [f"No platform here can use this machine ({'; '.join(reasons)})."]
    if undetermined and not any(p.verdict == Verdict.NOT_FEASIBLE for p in applicable):
        return [f"Not yet known: no platform is feasible for sure; {risk_text}."]
    return [f"No platform accepts this machine as it is; {risk_text}.", _first_obstacle(applicable)]


@dataclass
class _Fix:
    role: str
    variable: str
    action: str
    clears: set[str] = field(default_factory=set)
    lowers: Level | None = None
    dedicated_only: bool = False


def _short_fix(text: str) -> str:
    """The fix up to its first full stop or semicolon outside parentheses and backticks (a
    manual action is said whole, never cut inside an aside or a command)."""
    depth, in_code = 0, False
    text = text.strip()
    for i, char in enumerate(text):
        if char == "`":
            in_code = not in_code
        elif not in_code and char == "(":
            depth += 1
        elif not in_code and char == ")":
            depth = max(0, depth - 1)
        elif (not in_code and depth == 0 and char in ".;" and i + 1 < len(text) and text[i + 1].isspace()):
            return text[:i]
    return text.rstrip(".;")


def _no_nvidia(policies: list[PolicyResult]) -> bool:
    """GPU-1010 found no NVIDIA GPU that could work here (a GPU-less machine, a Mac)."""
    present = id_of(gpu_present)
    return any(f.id == present and f.status == Status.FAIL and no_nvidia_hardware(f.detail)
               for p in policies for f in p.findings)


def _fixes(policies: list[PolicyResult], risk: OwnerRisk) -> dict[str, _Fix]:
    registry = load_registry()
    fixes: dict[str, _Fix] = {}
    # No role or setting installs a GPU: a machine without one gets no step that claims to clear
    # a GPU check (GPU-1010's "install the driver", GPU-1120's "use a newer GPU").
    no_gpu = _no_nvidia(policies)

    def add(check_id: str, level: Level | None) -> None:
        meta = registry[check_id]
        role, _, variable = (part.strip() for part in meta.fix_role.partition(":"))
        key = meta.fix_role or check_id
        if key not in fixes:
            # A role is applied by the Ansible host profile (playbooks/site.yml), where most of
            # these variables are on by default: "set X" alone would send the owner looking for
            # X. The plan's heading says where roles come from (PLAN_HEAD in render/table.py).
            action = f"role {role} ({variable})" if role else f"by hand: {_short_fix(meta.fix)}"
            fixes[key] = _Fix(role, variable, action)
        fix = fixes[key]
        fix.clears.add(check_id)
        fix.dedicated_only = fix.dedicated_only or meta.dedicated_only
        if level is not None and (fix.lowers is None or LEVEL_RANK[level] > LEVEL_RANK[fix.lowers]):
            fix.lowers = level

    for policy in policies:
        if policy.applicable:
            for finding in policy.findings:
                if finding.status in NEEDS_FIX and not (no_gpu and finding.id.startswith("GPU-")):
                    add(finding.id, None)
    for row in risk.findings:
        if row.status == Status.WARN:
            add(row.id, row.level)
    return fixes


def _feasible_after(policy: PolicyResult, cleared: set[str] | frozenset[str]) -> bool:
    blockers = [f for f in policy.findings if f.severity == Severity.BLOCKER]
    return all(f.status not in UNDECIDED and (f.status != Status.FAIL or f.id in cleared) for f in blockers)


def _order(fixes: dict[str, _Fix], locked: list[PolicyResult], stops: bool,
           cleared: set[str] | None = None, unlocked: set[str] | None = None) -> list[PlanStep]:
    """``fixes`` in the order to make them: greedily, the step that unlocks most platforms (with
    those before it) and risks least; while owner risk stops hosting, the riskiest first."""
    fixes = dict(fixes)
    cleared = set() if cleared is None else cleared
    unlocked = set() if unlocked is None else unlocked
    steps: list[PlanStep] = []
    while fixes:
        def gain(key: str, done: frozenset[str] = frozenset(cleared)) -> tuple[int, ...]:
            fix = fixes[key]
            opens = sum(1 for p in locked if p.id not in unlocked and _feasible_after(p, done | fix.clears))
            lowers = -1 if fix.lowers is None else LEVEL_RANK[fix.lowers]
            order = (lowers, opens) if stops else (opens, lowers)
            return (*order, -int(fix.dedicated_only), len(fix.clears))

        key = max(sorted(fixes), key=gain)
        fix = fixes.pop(key)
        cleared |= fix.clears
        opens = [p.id for p in locked if p.id not in unlocked and _feasible_after(p, cleared)]
        unlocked.update(opens)
        steps.append(PlanStep(action=fix.action, role=fix.role, variable=fix.variable, clears=sorted(fix.clears),
                              unlocks=opens, lowers=fix.lowers, dedicated_only=fix.dedicated_only))
    return steps


def _plan(policies: list[PolicyResult], risk: OwnerRisk) -> tuple[list[PlanStep], str, list[PlanStep]]:
    """The steps to take now, a note on those held back, and the held-back steps: while owner
    risk stops hosting, only steps that lower it come now; the rest are listed for later (in
    ``--details`` and the JSON), and the note claims they would win platforms only where they would."""
    fixes = _fixes(policies, risk)
    locked = [p for p in policies if p.kind == PolicyKind.PLATFORM and p.applicable and p.verdict not in FEASIBLE]
    stops = risk.rating in OWNER_RISK_STOPS
    held = {key: fix for key, fix in fixes.items() if stops and fix.lowers is None}
    cleared: set[str] = set()
    unlocked: set[str] = set()
    steps = _order({k: f for k, f in fixes.items() if k not in held}, locked, stops, cleared, unlocked)
    later = _order(held, locked, False, cleared, unlocked)
    note = ""
    if later:
        won = [p for step in later for p in step.unlocks]
        count = counted(len(later), "more step")
        accepting = any(p.kind == PolicyKind.PLATFORM and p.applicable and p.verdict in FEASIBLE for p in policies)
        if won:
            note = f"{count} would then make {', '.join(won)} accept this machine; they come once owner risk is lower."
        elif accepting:
            note = f"{count} come once owner risk is lower."
        else:
            note = f"{count} come once owner risk is lower; no platform accepts this machine even then."
    return steps, note, later


def _cause(detail: str) -> tuple[str, str]:
    """An unknown's reason as a cause shared by other checks, and what settles it."""
    text = _PATH_PREFIX.sub("", detail.strip()) or "no reason given"
    text = _PATH_PREFIX.sub("", text)  # "path: path: reason" from nested lookups
    for words, cause, then in CAUSES:
        if any(word in text for word in words):
            return cause, then
    return text, ""


def _unknowns(policies: list[PolicyResult], risk: OwnerRisk) -> list[UnknownGroup]:
    registry = load_registry()
    no_gpu = _no_nvidia(policies)
    seen: dict[str, str] = {}
    for policy in policies:
        for finding in policy.findings:
            if finding.status in UNDECIDED:
                seen.setdefault(finding.id, finding.detail)
    for row in risk.findings:
        if row.status in UNDECIDED:
            seen.setdefault(row.id, row.detail)
    groups: dict[str, tuple[list[str], str]] = {}
    for check_id, detail in seen.items():
        cause, then = _cause(detail)
        if no_gpu and "NVML library" in detail:  # no driver to install: there is no GPU for it
            cause, then = NO_GPU, ""
        if not then:
            command = _COMMAND.search(registry[check_id].fix)
            then = f"run `{command.group(1)}`" if command and "hostcheck watch" in command.group(1) else ""
        ids, known_then = groups.setdefault(cause, ([], then))
        ids.append(check_id)
        if not known_then and then:
            groups[cause] = (ids, then)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1][0]), item[0]))
    return [UnknownGroup(cause=cause, checks=sorted(ids), then=then) for cause, (ids, then) in ordered]


def build_answer(policies: list[PolicyResult], risk: OwnerRisk) -> Answer:
    plan, note, later = _plan(policies, risk)
    return Answer(headline=_headline(policies, risk), owner_risk=owner_risk_line(risk), plan=plan, plan_note=note,
                  later=later, unknowns=_unknowns(policies, risk))
