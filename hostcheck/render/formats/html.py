"""``--format html``: one self-contained page to look at and to share (no script, nothing
loaded from anywhere), laid out by :mod:`hostcheck.render.html`, every value escaped there.

It renders the reports worth seeing as a page (the audit, the earnings, the watch report, the
fleet table) and declines the rest: a drift list, the rehearsals' table, the offer, the
policies and the explanations read as well as text. The whole report is on the page, folded:
``--details`` changes nothing.
"""

from __future__ import annotations

from typing import Any

from hostcheck.render.formats import Format, Options, register
from hostcheck.render.views import Kind


def _audit(view: Any, options: Options) -> str:
    from hostcheck.render.html import render_audit

    return render_audit(view.report, command=options.command, earnings_lines=view.earnings)


def _earnings(report: Any, options: Options) -> str:
    from hostcheck.render.earnings.html import render_earnings_html

    return render_earnings_html(report, command=options.command)


def _watch(view: Any, options: Options) -> str:
    from hostcheck.render.html import render_watch

    return render_watch(view.analysis, view.scores, view.db, command=options.command)


def _fleet(view: Any, options: Options) -> str:
    from hostcheck.render.html import render_fleet

    return render_fleet(view.rows, view.policy_ids, command=options.command)


HTML = register(Format(
    name="html",
    help="one self-contained page to look at and share",
    order=30,
    renderers={Kind.AUDIT: _audit, Kind.EARNINGS: _earnings, Kind.WATCH: _watch, Kind.FLEET: _fleet},
))  # fmt: skip
