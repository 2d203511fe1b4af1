"""``--format json``: each report's data, for programs (the audit's shape is the published
schema, hostcheck/schema/report-v1.json). Never NaN or Infinity (:func:`hostcheck.safeio.dumps`);
nothing is escaped, JSON's own quoting carries any value safely."""

from __future__ import annotations

from typing import Any

from hostcheck.render.formats import Format, Options, register
from hostcheck.render.views import Kind
from hostcheck.safeio import dumps


def _json(data: Any, *, ascii_only: bool = True, sort_keys: bool = False) -> str:
    return dumps(data, indent=2, ensure_ascii=ascii_only, sort_keys=sort_keys) + "\n"


def _audit(view: Any, options: Options) -> str:
    return _json(view.report.as_dict())  # the earnings lines are text; `hostcheck earnings -f json` has the figures


def _earnings(report: Any, options: Options) -> str:
    return _json(report)


def _offer(offer: Any, options: Options) -> str:
    return _json(offer.as_dict())


def _watch(view: Any, options: Options) -> str:
    from hostcheck.render.watch import to_json

    return _json(to_json(view.analysis, view.scores, view.db), ascii_only=False)


def _fleet(view: Any, options: Options) -> str:
    return _json({"policies": view.policy_ids, "hosts": [row.as_dict() for row in view.rows]})


def _fleet_drift(view: Any, options: Options) -> str:
    return _json([change.as_dict() for change in view.changes])


def _fleet_watch(view: Any, options: Options) -> str:
    return _json({"hosts": [row.as_dict() for row in view.rows]})


def _policies(view: Any, options: Options) -> str:
    rows = [
        {
            "id": p.id, "title": p.title, "platform": p.platform, "kind": p.kind, "summary": p.summary,
            "follows": p.follows,
            "sources": sorted({(r.source.title, r.source.url, r.source.checked, r.source.status, r.source.quote)
                               for r in p.requirements}),
        }
        for p in view.policies
    ]  # fmt: skip
    return _json(rows)


def _market(summary: Any, options: Options) -> str:
    return _json(summary)


def _market_trend(view: Any, options: Options) -> str:
    return _json({"db": view.db, "models": view.models})


def _stale(view: Any, options: Options) -> str:
    return _json({"today": view.today, "days": view.days, "sources": view.total,
                  "stale": [{"policy": r.policy, "key": r.key, "checked": r.checked, "days": r.days, "url": r.url,
                             "title": r.title} for r in view.rows]})


def _selftest(view: Any, options: Options) -> str:
    from hostcheck.render.selftest import render_json

    if view.refused is not None:
        return _json({"refused": view.refused, "preflight": view.run.preflight})
    return _json(render_json(view.run, view.verdict))


JSON = register(Format(
    name="json",
    help="the data, for programs",
    order=10,
    renderers={
        Kind.AUDIT: _audit, Kind.EARNINGS: _earnings, Kind.OFFER: _offer, Kind.WATCH: _watch, Kind.FLEET: _fleet,
        Kind.FLEET_DRIFT: _fleet_drift, Kind.FLEET_WATCH: _fleet_watch, Kind.POLICIES: _policies,
        Kind.STALE_SOURCES: _stale, Kind.MARKET: _market, Kind.MARKET_TREND: _market_trend, Kind.SELFTEST: _selftest,
    },
))  # fmt: skip
