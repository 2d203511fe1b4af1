"""The models the output formats render (:mod:`hostcheck.render.formats`), one per kind of
report, where a command's result is more than one object. A command builds its model and hands
it to :func:`hostcheck.render.formats.render` with the kind; every format reads the same model.

Kinds whose model is an object of its own need no view here: the audit's
:class:`~hostcheck.models.Report` (with the earnings lines, :class:`AuditView`), the earnings
report (the dict :func:`hostcheck.earnings.estimate.run` returns), the offer
(:class:`~hostcheck.measure.offer.Offer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """The kinds of report a format renders; the value names it in a message."""

    AUDIT = "audit report"
    EARNINGS = "earnings report"
    OFFER = "offer"
    WATCH = "watch report"
    FLEET = "fleet table"
    FLEET_DRIFT = "fleet drift"
    FLEET_WATCH = "fleet's rehearsals"
    POLICIES = "policy list"
    EXPLAIN_CHECK = "check explanation"
    EXPLAIN_AGENT = "agent explanation"
    MARKET = "market snapshot"
    MARKET_TREND = "market trend"
    SELFTEST = "self-test result"
    STALE_SOURCES = "list of sources not re-read"


@dataclass(frozen=True)
class AuditView:
    """`hostcheck audit`: the report, and the earnings lines the owner's prices gave (None: no
    prices were given; formats that carry the report's data alone, as JSON does, leave them out)."""

    report: Any  # hostcheck.models.Report
    earnings: list[str] | None = None


@dataclass(frozen=True)
class WatchView:
    """`hostcheck watch report`: the recording's analysis, each platform's rule applied, the database read."""

    analysis: Any  # hostcheck.recording.analysis.Analysis
    scores: list[Any]  # hostcheck.watch.rules.RuleScore
    db: str


@dataclass(frozen=True)
class FleetView:
    """`hostcheck fleet DIR...`: a row per host (in the order shown) and the policies' columns."""

    rows: list[Any]  # hostcheck.fleet.reports.FleetRow
    policy_ids: list[str]


@dataclass(frozen=True)
class FleetDriftView:
    """`hostcheck fleet diff`: what changed, per host."""

    changes: list[Any]  # hostcheck.fleet.reports.HostDrift


@dataclass(frozen=True)
class FleetWatchView:
    """`hostcheck fleet watch`: every host's rehearsal, worst first."""

    rows: list[Any]  # hostcheck.fleet.watch.WatchRow


@dataclass(frozen=True)
class MarketTrendView:
    """`hostcheck market report`: each recorded model's days, from the database named."""

    models: list[dict[str, Any]]
    db: str


@dataclass(frozen=True)
class SelftestView:
    """`hostcheck selftest`: the run and its verdict, or why it did not start (``refused``)."""

    run: Any  # hostcheck.selftest.results.Run
    verdict: Any = None  # hostcheck.selftest.verdict.Verdict; None when refused
    refused: list[str] | None = None


@dataclass(frozen=True)
class StaleSources:
    """`hostcheck policies --stale DAYS`: the sources read ``days`` or more days before ``today``
    (oldest first), out of ``total``."""

    rows: list[Any]  # hostcheck.rules_age.StaleSource
    total: int
    days: int
    today: str
    cutoff: str


@dataclass(frozen=True)
class PolicyList:
    """The shipped policies, loaded (`hostcheck policies`)."""

    policies: list[Any]  # hostcheck.models.Policy


@dataclass(frozen=True)
class CheckExplanation:
    """One check (`hostcheck explain ID`): its metadata and each shipped policy's requirement of it."""

    meta: Any  # hostcheck.checks.base.CheckMeta
    uses: list[tuple[str, Any]]
    """(policy name, requirement), in the order of the shipped policies."""


@dataclass(frozen=True)
class AgentExplanation:
    """Provider agents (`hostcheck explain vast`, `hostcheck explain agents`): what each takes."""

    agents: list[Any]  # hostcheck.knowledge.agent_catalog.Agent
    sources: dict[str, Any]
    """The catalogue's sources by key."""
    checks: list[Any] = field(default_factory=list)
    """The provider-agent family, and the owner-risk checks that speak for its members."""
