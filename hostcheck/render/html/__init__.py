"""The HTML report: one self-contained file (no script, no remote load of any kind, readable
offline and with JavaScript off), built from the same report models as the other formats.

One ``render_*`` per report kind, each returning the whole document; :func:`render_combined`
puts the audit, the earnings and the watch report in one file (``hostcheck report``). The earnings report's own layout is
:mod:`hostcheck.render.earnings.html`, beside its terminal layout. Safety
is by construction: markup comes only from :mod:`hostcheck.render.html.markup`, which escapes
every value and makes links only of ``https:`` addresses, and the page's Content-Security-Policy
forbids scripts and loads even if something slipped through.
"""

from __future__ import annotations

from hostcheck import __version__
from hostcheck.fleet.reports import FleetRow
from hostcheck.measure.offer import Offer
from hostcheck.models import Report
from hostcheck.recording.analysis import Analysis
from hostcheck.render.html.audit import audit_body, audit_header
from hostcheck.render.html.fleet import fleet_body, fleet_header
from hostcheck.render.html.markup import Markup, el
from hostcheck.render.html.offer import offer_section
from hostcheck.render.html.page import page
from hostcheck.render.html.watch import watch_body, watch_header
from hostcheck.render.watch import to_json
from hostcheck.watch.rules import RuleScore

__all__ = ["render_audit", "render_combined", "render_fleet", "render_watch"]


def _now() -> str:
    """When the page is made: the clock, or ``HOSTCHECK_NOW`` as for the audit's ``generated_at``."""
    from hostcheck.rules_age import now

    return now().replace(microsecond=0).isoformat()


def render_audit(report: Report, *, command: str = "", earnings_lines: list[str] | None = None) -> str:
    host = report.host.hostname or "this host"
    return page(f"hostcheck report — {host}", [audit_header(report, command), *audit_body(report, earnings_lines)])


def render_watch(analysis: Analysis, scores: list[RuleScore], db: str, *, command: str = "") -> str:
    data = to_json(analysis, scores, db)
    return page("hostcheck reliability rehearsal",
                [watch_header(data, __version__, command, _now()), *watch_body(analysis, scores, db)])


def render_fleet(rows: list[FleetRow], policy_ids: list[str], *, command: str = "") -> str:
    return page("hostcheck fleet", [fleet_header(__version__, command, _now(), len(rows)), *fleet_body(rows, policy_ids)])


def render_combined(report: Report, *, earnings: list[Markup] | str | None = None,
                    watch: tuple[Analysis, list[RuleScore], str] | None = None, offer: Offer | None = None,
                    command: str = "") -> str:
    """The audit, then (when given) the offer preview, the earnings (or why there are none) and
    the watch report, in one file. ``earnings`` is the earnings section
    (:func:`hostcheck.render.earnings.html.earnings_body`), or the sentence that says why there is none."""
    body: list[Markup] = [audit_header(report, command), *audit_body(report)]
    if offer is not None:
        body.append(offer_section(offer))
    if isinstance(earnings, str):
        body += [el("h2", "Earnings", id="earnings-report"), el("p", earnings)]
    elif earnings is not None:
        body += [el("hr"), el("h2", "Earnings", id="earnings-report"), *earnings]
    if watch is not None:
        body += [el("hr"), el("h2", "Reliability rehearsal", id="watch-report"), *watch_body(*watch)]
    host = report.host.hostname or "this host"
    return page(f"hostcheck report — {host}", body)


