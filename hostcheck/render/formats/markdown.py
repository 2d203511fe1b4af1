"""``--format markdown``: for forum posts and tickets, every value from the facts made inert as
Markdown (:mod:`hostcheck.render.markdown_escape`)."""

from __future__ import annotations

from typing import Any

from hostcheck.render.formats import Format, Options, register
from hostcheck.render.views import Kind


def _audit(view: Any, options: Options) -> str:
    from hostcheck.render.escape import escape_text
    from hostcheck.render.markdown import render_markdown
    from hostcheck.render.markdown_escape import markdown_tree

    text = render_markdown(markdown_tree(view.report), verbose=options.details)
    if view.earnings is not None:
        text += "\n## Earnings\n\n" + "".join(f"- {escape_text(line)}\n" for line in view.earnings)
    return text


def _earnings(report: Any, options: Options) -> str:
    from hostcheck.render.earnings import render_earnings

    return render_earnings(report, markdown=True, details=options.details)


def _offer(offer: Any, options: Options) -> str:
    from hostcheck.render.offer import offer_text

    return offer_text(offer, markdown=True, details=options.details)


def _watch(view: Any, options: Options) -> str:
    from hostcheck.render.watch import watch_text

    return watch_text(view.analysis, view.scores, view.db, markdown=True, details=options.details)


def _fleet(view: Any, options: Options) -> str:
    from hostcheck.render.fleet import fleet_table

    return fleet_table(view.rows, view.policy_ids, markdown=True)


def _fleet_drift(view: Any, options: Options) -> str:
    from hostcheck.render.fleet import drift_text

    return drift_text(view.changes, markdown=True)


def _fleet_watch(view: Any, options: Options) -> str:
    from hostcheck.render.fleet_watch import watch_table

    return watch_table(view.rows, markdown=True)


def _market(summary: Any, options: Options) -> str:
    from hostcheck.render.market import render_snapshot

    return render_snapshot(summary, markdown=True)


def _market_trend(view: Any, options: Options) -> str:
    from hostcheck.render.market import render_trend

    return render_trend(view.models, view.db, markdown=True)


MARKDOWN = register(Format(
    name="markdown",
    help="for forum posts and tickets",
    order=20,
    renderers={
        Kind.AUDIT: _audit, Kind.EARNINGS: _earnings, Kind.OFFER: _offer, Kind.WATCH: _watch, Kind.FLEET: _fleet,
        Kind.FLEET_DRIFT: _fleet_drift, Kind.FLEET_WATCH: _fleet_watch,
        Kind.MARKET: _market, Kind.MARKET_TREND: _market_trend,
    },
))  # fmt: skip
