"""``hostcheck explain`` (a check or a provider agent, with sources) and ``hostcheck policies``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hostcheck.commands.common import DEFAULT_FORMAT, FormatName, die, format_option
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_INTERNAL, EXIT_STALE_SOURCES
from hostcheck.render.formats import Kind, Options, render


def policies(
    fmt: Annotated[FormatName, format_option(Kind.POLICIES, help="How to print the list.")] = DEFAULT_FORMAT,
    stale: Annotated[int | None, typer.Option(
        "--stale", metavar="DAYS", min=0, max=MAX_STALE_DAYS,
        help="Only the sources not re-read within the last DAYS days (0: every source); exit 3 when there are any.",
    )] = None,
    details: Annotated[bool, typer.Option("--details", help="Also each policy's sources and the sentences they are cited for.")] = False,
) -> None:
    """List the shipped policies with their sources."""
    from hostcheck.errors import PolicyError
    from hostcheck.policy import load_shipped, shipped_policy_names
    from hostcheck.render.views import PolicyList

    try:
        loaded = [load_shipped(name) for name in shipped_policy_names()]
    except PolicyError as exc:  # a shipped policy that does not load is a bug, not the user's input
        die(str(exc), EXIT_INTERNAL)
    if stale is not None:  # exit 3 when there is a source to re-read
        view = _stale(loaded, stale)
        typer.echo(render(Kind.STALE_SOURCES, view, fmt), nl=False)
        raise typer.Exit(EXIT_STALE_SOURCES if view.rows else 0)
    typer.echo(render(Kind.POLICIES, PolicyList(loaded), fmt, Options(details=details)), nl=False)


MAX_STALE_DAYS = 100_000
"""--stale's upper bound: some 270 years, beyond any date a source can carry."""


def _stale(loaded: list[Any], days: int) -> Any:
    """The sources read ``days`` or more days ago, oldest first (``hostcheck policies --stale``)."""
    import datetime as dt

    from hostcheck.render.views import StaleSources
    from hostcheck.rules_age import now, sources_of, stale_sources

    today = now().date()
    return StaleSources(stale_sources(loaded, today, days), len(sources_of(loaded)), days, today.isoformat(),
                        (today - dt.timedelta(days=days)).isoformat())


def _explain_agents(agent_ids: list[str]) -> None:
    from hostcheck.knowledge.agent_catalog import load_catalog
    from hostcheck.render.views import AgentExplanation

    catalog = load_catalog()
    agents = []
    for agent_id in agent_ids:
        agent = catalog.get(agent_id)
        if agent is None:
            raise UsageError(f"unknown agent {agent_id!r}")
        agents.append(agent)
    model = AgentExplanation(agents, dict(catalog.sources), _agent_checks())
    typer.echo(render(Kind.EXPLAIN_AGENT, model), nl=False)


def explain(check_id: Annotated[str, typer.Argument(
        help="A check id, e.g. GPU-1050, or a provider agent: vast, salad, ionet, tensordock (or 'agents' for all).")]) -> None:
    """Why a check matters, how it is measured, the fix, and which policies use it with what threshold;
    or, for a provider agent, what it takes on the machine and why, with sources."""
    from hostcheck.checks import load_registry
    from hostcheck.knowledge.agent_catalog import load_catalog
    from hostcheck.policy import load_shipped, shipped_policy_names
    from hostcheck.render.views import CheckExplanation

    agent_ids = [a.id for a in load_catalog().agents]
    if check_id.lower() == "agents":
        _explain_agents(agent_ids)
        return
    if check_id.lower() in agent_ids:
        _explain_agents([check_id.lower()])
        return
    registry = load_registry()
    meta = registry.get(check_id.upper())
    if meta is None:
        raise UsageError(f"unknown check id {check_id!r}; ids look like GPU-1050 (see `hostcheck explain --help`)")
    uses = [(name, req) for name in shipped_policy_names() for req in load_shipped(name).requirements
            if req.check == meta.id]
    typer.echo(render(Kind.EXPLAIN_CHECK, CheckExplanation(meta, uses)), nl=False)


def _agent_checks() -> list[Any]:
    """The provider-agent family, and the owner-risk checks that speak for its members."""
    from hostcheck.checks import load_registry
    from hostcheck.checks.agents import AGT

    registry = load_registry()
    family = [m for m in registry.values() if m.prefix == AGT.prefix]
    speaking = {m.superseded_by for m in family if m.superseded_by}
    return sorted(family, key=lambda m: m.id) + [registry[i] for i in sorted(speaking)]
