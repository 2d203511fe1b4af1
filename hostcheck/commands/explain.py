"""``hostcheck explain`` (a check or a provider agent, with sources) and ``hostcheck policies``."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from hostcheck.commands.common import OutputFormat, die
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_INTERNAL, EXIT_STALE_SOURCES
from hostcheck.render.terminal import terminal_width, wrap


class ListFormat(StrEnum):
    """The formats of the policy list."""

    TABLE = OutputFormat.TABLE.value
    JSON = OutputFormat.JSON.value


def policies(
    fmt: Annotated[ListFormat, typer.Option("--format", "-f", help="How to print the list.")] = ListFormat.TABLE,
    stale: Annotated[int | None, typer.Option(
        "--stale", metavar="DAYS", min=0, max=MAX_STALE_DAYS,
        help="Only the sources not re-read within the last DAYS days (0: every source); exit 3 when there are any.",
    )] = None,
) -> None:
    """List the shipped policies with their sources."""
    from hostcheck.errors import PolicyError
    from hostcheck.policy import load_shipped, shipped_policy_names

    try:
        loaded = [load_shipped(name) for name in shipped_policy_names()]
    except PolicyError as exc:  # a shipped policy that does not load is a bug, not the user's input
        die(str(exc), EXIT_INTERNAL)
    if stale is not None:
        _stale(loaded, stale, fmt)
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
    width = terminal_width()
    for p in loaded:
        _say(f"{p.id}: {p.title} [{len(p.requirements)} requirements, {p.kind}]", width)
        quoted: dict[str, dict[str, Any]] = {}  # url -> key -> source, in the order first cited
        for r in p.requirements:
            quoted.setdefault(r.source.url, {}).setdefault(r.source.key, r.source)
        for url, by_key in quoted.items():
            first = next(iter(by_key.values()))
            _say(f"    source: {first.title} <{url}> (checked {first.checked})", width)
            for source in by_key.values():
                for line in _source_lines(source, "", "      ", width):
                    typer.echo(line)


MAX_STALE_DAYS = 100_000
"""--stale's upper bound: some 270 years, beyond any date a source can carry."""


def _stale(loaded: list[Any], days: int, fmt: ListFormat) -> None:
    """The sources read ``days`` or more days ago (``hostcheck policies --stale DAYS``), oldest
    first; exit 3 when there is one, 0 when there is none."""
    import datetime as dt

    from hostcheck.rules_age import now, sources_of, stale_sources

    today = now().date()
    rows = stale_sources(loaded, today, days)
    total = len(sources_of(loaded))
    cutoff = (today - dt.timedelta(days=days)).isoformat()
    if fmt is ListFormat.JSON:
        sys.stdout.write(json.dumps({
            "today": today.isoformat(), "days": days, "sources": total,
            "stale": [{"policy": r.policy, "key": r.key, "checked": r.checked, "days": r.days, "url": r.url,
                       "title": r.title} for r in rows],
        }, indent=2) + "\n")
    else:
        width = terminal_width()
        within = f"within the last {days} day{'s' if days != 1 else ''}"
        if not rows:
            _say(f"All {total} sources of the shipped policies were read {within} "
                 f"(after {cutoff}).", width)
        else:
            _say(f"{len(rows)} of {total} sources of the shipped policies not re-read {within} "
                 f"(read on or before {cutoff}):", width)
        for r in rows:
            _say(f"  {r.policy} {r.key}: read {r.checked} ({r.days} day{'s' if r.days != 1 else ''} ago)", width)
            _say(f"    <{r.url}>", width)
    raise typer.Exit(EXIT_STALE_SOURCES if rows else 0)


def _say(text: str, width: int) -> None:
    """Print ``text`` at the terminal's width: each line escaped and wrapped (continuations
    indented two more than the line), no trailing spaces."""
    from hostcheck.render.escape import escape_text

    for paragraph in text.split("\n"):
        lead = paragraph[: len(paragraph) - len(paragraph.lstrip(" "))]
        for line in wrap(escape_text(paragraph.strip()), width, first=lead, indent=lead + "  ", whole_urls=True):
            typer.echo(line)


def _source_lines(source: Any, own_choice: str, indent: str, width: int, what: str = "threshold") -> list[str]:
    """A source's status and the sentence it is cited for (and, where hostcheck chose the
    threshold itself, or the requirement when the check takes none, why), escaped and wrapped
    to the terminal."""
    from hostcheck.render.escape import escape_text

    lines = wrap(escape_text(f"{source.status_text}: {source.quote_text}"), width, indent=indent + "  ", first=indent)
    if own_choice:
        lines += wrap(escape_text(f"{what}: hostcheck's own choice. {own_choice}"), width,
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
    _say(f"\nWhy it matters:\n  {meta.why}\n\nHow to fix:\n  {meta.fix}", width)
    if meta.fix_role:
        _say(f"  Ansible profile: {meta.fix_role}", width)
    typer.echo("\nUsed by:")
    for name in shipped_policy_names():
        for req in load_shipped(name).requirements:
            if req.check == meta.id:
                need = f"{meta.op} {req.threshold} {meta.unit}".strip() + ", " if req.threshold is not None else ""
                weight = f"{req.level} risk" if req.level else req.severity
                _say(f"  {name:16} {weight:11} {need}{req.source.title} ({req.source.checked})", width)
                _say(f"    <{req.source.url}>", width)
                if req.note:
                    _say(f"    {req.note}", width)
                what = "threshold" if req.threshold is not None else "requirement"
                for line in _source_lines(req.source, req.own_choice, "    ", width, what):
                    typer.echo(line)
    _say_selftest(meta.id, width)


def _say_selftest(check_id: str, width: int) -> None:
    """The checks of Vast's own self-test that this check predicts (docs/audit.md has them all)."""
    from hostcheck.selftest_map import load_selftest_map

    selftest = load_selftest_map("vast")
    rows = [row for row in selftest.checks if check_id in (row.predicted_by or [])]
    if rows:
        _say(f"\nPredicts these checks of Vast's self-test (`{selftest.command}`):", width)
        for row in rows:
            _say(f"  {row.id} ({row.stage}): {row.title}", width)


def _agent_checks() -> list[Any]:
    """The provider-agent family, and the owner-risk checks that speak for its members."""
    from hostcheck.checks import load_registry
    from hostcheck.checks.agents import AGT

    registry = load_registry()
    family = [m for m in registry.values() if m.prefix == AGT.prefix]
    speaking = {m.superseded_by for m in family if m.superseded_by}
    return sorted(family, key=lambda m: m.id) + [registry[i] for i in sorted(speaking)]
