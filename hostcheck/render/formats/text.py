"""The terminal's format (``--format table``, the default): text wrapped to the terminal's
width, every value from the facts escaped (:mod:`hostcheck.render.escape`)."""

from __future__ import annotations

from typing import Any

from hostcheck.render.formats import Format, Options, register
from hostcheck.render.views import Kind


def _audit(view: Any, options: Options) -> str:
    from hostcheck.render.escape import escape_text, escape_tree
    from hostcheck.render.table import render_table

    text = render_table(escape_tree(view.report), verbose=options.details, color=options.color)
    if view.earnings is not None:
        text += "\n" + "".join(f"{escape_text(line)}\n" for line in view.earnings)
    return text


def _earnings(report: Any, options: Options) -> str:
    from hostcheck.render.earnings import render_earnings

    return render_earnings(report, details=options.details)


def _offer(offer: Any, options: Options) -> str:
    from hostcheck.render.offer import offer_text

    return offer_text(offer, details=options.details)


def _watch(view: Any, options: Options) -> str:
    from hostcheck.render.watch import watch_text

    return watch_text(view.analysis, view.scores, view.db, details=options.details)


def _fleet(view: Any, options: Options) -> str:
    from hostcheck.render.fleet import fleet_table

    return fleet_table(view.rows, view.policy_ids)


def _fleet_drift(view: Any, options: Options) -> str:
    from hostcheck.render.fleet import drift_text

    return drift_text(view.changes)


def _fleet_watch(view: Any, options: Options) -> str:
    from hostcheck.render.fleet_watch import watch_table

    return watch_table(view.rows)


def _policies(view: Any, options: Options) -> str:
    from hostcheck.render.explain import policy_list_text
    from hostcheck.render.terminal import terminal_width

    return policy_list_text(view, terminal_width(), details=options.details)


def _stale(view: Any, options: Options) -> str:
    from hostcheck.render.explain import stale_text
    from hostcheck.render.terminal import terminal_width

    return stale_text(view.rows, view.total, view.days, view.cutoff, terminal_width())


def _check(view: Any, options: Options) -> str:
    from hostcheck.render.explain import check_text
    from hostcheck.render.terminal import terminal_width

    return check_text(view, terminal_width())


def _agents(view: Any, options: Options) -> str:
    from hostcheck.render.explain import agent_text
    from hostcheck.render.terminal import terminal_width

    return agent_text(view, terminal_width())


def _market(summary: Any, options: Options) -> str:
    from hostcheck.render.market import render_snapshot
    from hostcheck.render.terminal import terminal_width

    return render_snapshot(summary, width=terminal_width())


def _market_trend(view: Any, options: Options) -> str:
    from hostcheck.render.market import render_trend
    from hostcheck.render.terminal import terminal_width

    return render_trend(view.models, view.db, width=terminal_width())


def _selftest(view: Any, options: Options) -> str:
    from hostcheck.render.selftest import render_refusal, render_text

    return render_refusal(view.refused) if view.refused is not None else render_text(view.run, view.verdict)


TEXT = register(Format(
    name="table",
    help="text for the terminal",
    order=0,
    terminal=True,
    renderers={
        Kind.AUDIT: _audit, Kind.EARNINGS: _earnings, Kind.OFFER: _offer, Kind.WATCH: _watch, Kind.FLEET: _fleet,
        Kind.FLEET_DRIFT: _fleet_drift, Kind.FLEET_WATCH: _fleet_watch, Kind.POLICIES: _policies,
        Kind.STALE_SOURCES: _stale, Kind.EXPLAIN_CHECK: _check, Kind.EXPLAIN_AGENT: _agents,
        Kind.MARKET: _market, Kind.MARKET_TREND: _market_trend, Kind.SELFTEST: _selftest,
    },
))  # fmt: skip
