"""`hostcheck explain` (a check, or a provider agent) and `hostcheck policies` as terminal text:
each line escaped and wrapped to the terminal's width."""

from __future__ import annotations

from typing import Any

from hostcheck.render.escape import escape_text
from hostcheck.render.terminal import wrap
from hostcheck.render.views import AgentExplanation, CheckExplanation, PolicyList
from hostcheck.wording import counted, unit_for


def say(text: str, width: int) -> list[str]:
    """``text`` at the terminal's width: each line escaped and wrapped (continuations indented
    two more than the line), no trailing spaces."""
    out: list[str] = []
    for paragraph in text.split("\n"):
        lead = paragraph[: len(paragraph) - len(paragraph.lstrip(" "))]
        out += wrap(escape_text(paragraph.strip()), width, first=lead, indent=lead + "  ", whole_urls=True)
    return out


def source_lines(source: Any, own_choice: str, indent: str, width: int, what: str = "threshold",
                 checked: bool = False) -> list[str]:
    """A source's status (with ``checked``, the date it was read) and the sentence it is cited
    for (and, where hostcheck chose the threshold itself, or the requirement when the check
    takes none, why), escaped and wrapped to the terminal."""
    status = f"{source.status_text}, read {source.checked}" if checked else source.status_text
    lines = wrap(escape_text(f"{status}: {source.quote_text}"), width, indent=indent + "  ", first=indent)
    if own_choice:
        lines += wrap(escape_text(f"{what}: hostcheck's own choice. {own_choice}"), width,
                      indent=indent + "  ", first=indent)
    return lines


def _text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def policy_list_text(model: PolicyList, width: int, details: bool = False) -> str:
    """A line per policy (its requirements, sources and when they were read); with ``details``,
    each source and the sentences it is cited for."""
    out: list[str] = []
    seen: set[str] = set()
    for p in model.policies:
        quoted: dict[str, dict[str, Any]] = {}  # url -> key -> source, in the order first cited
        for r in p.requirements:
            quoted.setdefault(r.source.url, {}).setdefault(r.source.key, r.source)
        dates = sorted({r.source.checked for r in p.requirements})
        read = f"read {dates[0]}" if len(dates) == 1 else f"read {dates[0]} to {dates[-1]}"
        text = escape_text(f"{p.id}: {p.title} [{counted(len(p.requirements), 'requirement')}, {p.kind}; "
                           f"{counted(len(quoted), 'source')}, {read}]")
        # Two policies' lines may wrap to the same last line ("read 2026-12-03]"): a little
        # narrower where they would, so nothing on the screen reads twice.
        for narrower in range(width, width - 16, -1):
            lines = wrap(text, narrower, first="", indent="  ")
            if not seen.intersection(lines):
                break
        seen.update(lines)
        out += lines
        if not details:
            continue
        for url, by_key in quoted.items():
            first = next(iter(by_key.values()))
            out += say(f"    source: {first.title}", width)
            out += say(f"      <{url}>", width)
            for source in by_key.values():
                out += source_lines(source, "", "      ", width, checked=len(dates) > 1)
    if not details:
        out += say("\nEach policy's sources, with the sentence each is cited for: `hostcheck policies --details`; one "
                   "check's: `hostcheck explain ID`.", width)
    return _text(out)


def _agent_lines(agent: Any, model: AgentExplanation, width: int) -> list[str]:
    out: list[str] = []

    def echo(text: str) -> None:
        out.extend(say(text, width))

    echo(f"{agent.platform} host agent ({agent.id}): what it takes on your machine, and why")
    echo(f"Modelled on: {agent.modelled}")
    keys: list[str] = []
    for take in agent.takes:
        echo(f"\n  - {take.what}\n    why: {take.why}\n    source: [{take.source}]")
        keys.append(take.source)
    channel = agent.update_channel
    kind = "fetches and runs code from the platform" if channel.remote_code else "no self-fetching code channel"
    echo(f"\nUpdates ({kind}):\n  {channel.text.strip()}\n  source: [{channel.source}]")
    keys.append(channel.source)
    echo(f"\nRuns its workloads on ({agent.engine.kind}):\n  {agent.engine.text}\n"
         f"  source: [{agent.engine.source}]")
    keys.append(agent.engine.source)
    if agent.conflict and agent.conflict_source:
        heading = "Alone on the machine" if agent.exclusive else "What it changes under other agents"
        echo(f"\n{heading}:\n  {agent.conflict}\n  source: [{agent.conflict_source}]")
        keys.append(agent.conflict_source)
    recognised = [*agent.accounts, *agent.units, *agent.paths, *agent.packages, *(f"container {c}" for c in agent.containers)]
    echo(f"\nRecognised by: {', '.join(recognised)}")
    out += ["", "Sources:"]
    for key in dict.fromkeys(keys):
        source = model.sources[key]
        echo(f"  [{key}] {source.title} (checked {source.checked})\n    <{source.url}>")
        if source.note:
            echo(f"    {source.note.strip()}")
    out += ["", "Checks:"]
    out += [f"  {meta.id} {meta.title}" for meta in model.checks]
    return out


def agent_text(model: AgentExplanation, width: int) -> str:
    out: list[str] = []
    for number, agent in enumerate(model.agents):
        if number:
            out += ["", "-" * 72, ""]
        out += _agent_lines(agent, model, width)
    return _text(out)


def check_text(model: CheckExplanation, width: int) -> str:
    meta = model.meta
    out = say(f"{meta.id}  {meta.title}  ({meta.family})", width)
    out += say(f"Why it matters: {meta.why}\nHow to fix: {meta.fix}", width)
    if meta.fix_role:
        role, _, variable = meta.fix_role.partition(":")
        out += say(f"The Ansible host profile fixes it: role {role.strip()}, variable {variable.strip()}.", width)
    # Grouped by the sentence cited: policies that rest on the same quote share its source lines.
    groups: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for name, req in model.uses:
        groups.setdefault((req.source.url, req.source.quote), []).append((name, req))
    if groups:
        out.append("Used by (policy: weight, threshold; its note), under the source each rests on:")
    shown_urls: set[str] = set()
    for (url, _), uses in groups.items():
        said: dict[str, list[str]] = {}  # policies that hold the check alike are named together
        for name, req in uses:
            need = f", {meta.op} {req.threshold} {unit_for(req.threshold, meta.unit)}".rstrip() \
                if req.threshold is not None else ""
            weight = f"{req.level} risk" if req.level else req.severity
            said.setdefault(f"{weight}{need}" + (f"; {req.note}" if req.note else ""), []).append(name)
        for text, names in said.items():
            out += say(f"  - {', '.join(names)}: {text}", width)
        source = uses[0][1].source
        # The page's address names it (docs/sources.md and `policies --details` have its title);
        # a page cited again is said once.
        out += say("    source: the page above" if url in shown_urls else f"    <{url}>", width)
        shown_urls.add(url)
        own = "; ".join(dict.fromkeys(req.own_choice for _, req in uses if req.own_choice))
        what = "threshold" if any(req.threshold is not None for _, req in uses) else "requirement"
        out += source_lines(source, own, "      ", width, what, checked=True)
    out += _selftest_lines(meta.id, width)
    return _text(out)


def _selftest_lines(check_id: str, width: int) -> list[str]:
    """The checks of Vast's own self-test that this check predicts (docs/audit.md has them all)."""
    from hostcheck.selftest_map import load_selftest_map

    selftest = load_selftest_map("vast")
    rows = [row for row in selftest.checks if check_id in (row.predicted_by or [])]
    if not rows:
        return []
    return say(f"Predicts these checks of Vast's self-test (`{selftest.command}`; docs/audit.md has them all): "
               + "; ".join(f"{row.id} ({row.stage})" for row in rows) + ".", width)


def stale_text(rows: list[Any], total: int, days: int, cutoff: str, width: int) -> str:
    """``hostcheck policies --stale DAYS``: the sources not re-read within DAYS days."""
    within = f"within the last {counted(days, 'day')}"
    if not rows:
        out = say(f"All {total} sources of the shipped policies were read {within} (after {cutoff}).", width)
    else:
        out = say(f"{len(rows)} of {total} sources of the shipped policies not re-read {within} "
                  f"(read on or before {cutoff}):", width)
    for r in rows:
        out += say(f"  {r.policy} {r.key}: read {r.checked} ({counted(r.days, 'day')} ago)", width)
        out += say(f"    <{r.url}>", width)
    return _text(out)
