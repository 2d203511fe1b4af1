"""``hostcheck explain`` (a check or a provider agent, with sources) and ``hostcheck policies``."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from hostcheck.commands.common import OutputFormat, die
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_INTERNAL
from hostcheck.render.terminal import terminal_width, wrap
from hostcheck.wording import plural, unit_for


class ListFormat(StrEnum):
    """The formats of the policy list."""

    TABLE = OutputFormat.TABLE.value
    JSON = OutputFormat.JSON.value


def policies(
    fmt: Annotated[ListFormat, typer.Option("--format", "-f", help="How to print the list.")] = ListFormat.TABLE,
    details: Annotated[bool, typer.Option("--details", help="Also each policy's sources and the sentences they are cited for.")] = False,
) -> None:
    """List the shipped policies with their sources."""
    from hostcheck.errors import PolicyError
    from hostcheck.policy import load_shipped, shipped_policy_names

    try:
        loaded = [load_shipped(name) for name in shipped_policy_names()]
    except PolicyError as exc:  # a shipped policy that does not load is a bug, not the user's input
        die(str(exc), EXIT_INTERNAL)
    if fmt is ListFormat.JSON:
        rows = [
            {
                "id": p.id, "title": p.title, "platform": p.platform, "kind": p.kind, "summary": p.summary,
                "follows": p.follows,
                "sources": sorted({(r.source.title, r.source.url, r.source.checked, r.source.status, r.source.quote)
                                   for r in p.requirements}),
            }
            for p in loaded
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    from hostcheck.render.escape import escape_text

    width = terminal_width()
    seen: set[str] = set()
    for p in loaded:
        quoted: dict[str, dict[str, Any]] = {}  # url -> key -> source, in the order first cited
        for r in p.requirements:
            quoted.setdefault(r.source.url, {}).setdefault(r.source.key, r.source)
        dates = sorted({r.source.checked for r in p.requirements})
        read = f"read {dates[0]}" if len(dates) == 1 else f"read {dates[0]} to {dates[-1]}"
        text = escape_text(f"{p.id}: {p.title} [{plural(len(p.requirements), 'requirement')}, {p.kind}; "
                           f"{plural(len(quoted), 'source')}, {read}]")
        # Two policies' lines may wrap to the same last line ("read 2026-12-03]"): a little
        # narrower where they would, so nothing on the screen reads twice.
        for narrower in range(width, width - 16, -1):
            lines = wrap(text, narrower, first="", indent="  ")
            if not seen.intersection(lines):
                break
        seen.update(lines)
        for line in lines:
            typer.echo(line)
        if not details:
            continue
        for url, by_key in quoted.items():
            first = next(iter(by_key.values()))
            _say(f"    source: {first.title}", width)
            _say(f"      <{url}>", width)
            for source in by_key.values():
                for line in _source_lines(source, "", "      ", width, checked=len(dates) > 1):
                    typer.echo(line)
    if not details:
        _say("\nEach policy's sources, with the sentence each is cited for: `hostcheck policies --details`; one "
             "check's: `hostcheck explain ID`.", width)


def _say(text: str, width: int) -> None:
    """Print ``text`` at the terminal's width: each line escaped and wrapped (continuations
    indented two more than the line), no trailing spaces."""
    from hostcheck.render.escape import escape_text

    for paragraph in text.split("\n"):
        lead = paragraph[: len(paragraph) - len(paragraph.lstrip(" "))]
        for line in wrap(escape_text(paragraph.strip()), width, first=lead, indent=lead + "  ", whole_urls=True):
            typer.echo(line)


def _source_lines(source: Any, own_choice: str, indent: str, width: int, checked: bool = False) -> list[str]:
    """A source's status (with ``checked``, the date it was read) and the sentence it is cited
    for (and, where hostcheck chose the threshold itself, why), escaped and wrapped to the terminal."""
    from hostcheck.render.escape import escape_text

    status = f"{source.status_text}, read {source.checked}" if checked else source.status_text
    lines = wrap(escape_text(f'{status}: "{source.quote}"'), width, indent=indent + "  ", first=indent)
    if own_choice:
        lines += wrap(escape_text(f"threshold: hostcheck's own choice. {own_choice}"), width,
                      indent=indent + "  ", first=indent)
    return lines


def _explain_agent(agent_id: str) -> None:
    from hostcheck.knowledge.agent_catalog import load_catalog
    width = terminal_width()

    def echo(text: str) -> None:
        _say(text, width)

    catalog = load_catalog()
    agent = catalog.get(agent_id)
    if agent is None:
        raise UsageError(f"unknown agent {agent_id!r}")
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
    typer.echo("\nSources:")
    for key in dict.fromkeys(keys):
        source = catalog.sources[key]
        echo(f"  [{key}] {source.title} (checked {source.checked})\n    <{source.url}>")
        if source.note:
            echo(f"    {source.note.strip()}")
    typer.echo("\nChecks:")
    for meta in _agent_checks():
        typer.echo(f"  {meta.id} {meta.title}")


def explain(check_id: Annotated[str, typer.Argument(
        help="A check id, e.g. GPU-1050, or a provider agent: vast, salad, ionet, tensordock (or 'agents' for all).")]) -> None:
    """Why a check matters, how it is measured, the fix, and which policies use it with what threshold;
    or, for a provider agent, what it takes on the machine and why, with sources."""
    from hostcheck.checks import load_registry
    from hostcheck.knowledge.agent_catalog import load_catalog
    from hostcheck.policy import load_shipped, shipped_policy_names

    agent_ids = [a.id for a in load_catalog().agents]
    if check_id.lower() == "agents":
        for number, agent_id in enumerate(agent_ids):
            if number:
                typer.echo("\n" + "-" * 72 + "\n")
            _explain_agent(agent_id)
        return
    if check_id.lower() in agent_ids:
        _explain_agent(check_id.lower())
        return
    registry = load_registry()
    meta = registry.get(check_id.upper())
    if meta is None:
        raise UsageError(f"unknown check id {check_id!r}; ids look like GPU-1050 (see `hostcheck explain --help`)")
    width = terminal_width()
    _say(f"{meta.id}  {meta.title}  ({meta.family})", width)
    _say(f"Why it matters: {meta.why}\nHow to fix: {meta.fix}", width)
    if meta.fix_role:
        role, _, variable = meta.fix_role.partition(":")
        _say(f"The Ansible host profile fixes it: role {role.strip()}, variable {variable.strip()}.", width)
    # Grouped by the sentence cited: policies that rest on the same quote share its source lines.
    groups: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for name in shipped_policy_names():
        for req in load_shipped(name).requirements:
            if req.check == meta.id:
                groups.setdefault((req.source.url, req.source.quote), []).append((name, req))
    if groups:
        typer.echo("Used by (policy: weight, threshold; its note), under the source each rests on:")
    shown_urls: set[str] = set()
    for (url, _), uses in groups.items():
        said: dict[str, list[str]] = {}  # policies that hold the check alike are named together
        for name, req in uses:
            need = f", {meta.op} {req.threshold} {unit_for(req.threshold, meta.unit)}".rstrip() \
                if req.threshold is not None else ""
            weight = f"{req.level} risk" if req.level else req.severity
            said.setdefault(f"{weight}{need}" + (f"; {req.note}" if req.note else ""), []).append(name)
        for text, names in said.items():
            _say(f"  - {', '.join(names)}: {text}", width)
        source = uses[0][1].source
        _say(f"    source: {source.title}" + (" (the page above)" if url in shown_urls else ""), width)
        if url not in shown_urls:
            _say(f"      <{url}>", width)
        shown_urls.add(url)
        own = "; ".join(dict.fromkeys(req.own_choice for _, req in uses if req.own_choice))
        for line in _source_lines(source, own, "      ", width, checked=True):
            typer.echo(line)


def _agent_checks() -> list[Any]:
    """The provider-agent family, and the owner-risk checks that speak for its members."""
    from hostcheck.checks import load_registry
    from hostcheck.checks.agents import AGT

    registry = load_registry()
    family = [m for m in registry.values() if m.prefix == AGT.prefix]
    speaking = {m.superseded_by for m in family if m.superseded_by}
    return sorted(family, key=lambda m: m.id) + [registry[i] for i in sorted(speaking)]
