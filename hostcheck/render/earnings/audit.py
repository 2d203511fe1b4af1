"""The audit's closing earnings lines: one per feasible platform, net per month at the given
occupancy or the break-even price; or what is missing to compute them. The audit's headline
(and an owner-risk warning) stands."""

from __future__ import annotations

from typing import Any

from hostcheck.earnings.headline import span_text
from hostcheck.earnings.report import audit_feasible
from hostcheck.errors import EarningsMissingError
from hostcheck.models import OWNER_RISK_STOPS, Rating


def missing_lines(missing: EarningsMissingError) -> list[str]:
    return [f"Earnings: not computed, {missing}; `hostcheck earnings --help` shows every option."]


def audit_lines(report: dict[str, Any], rating: Rating) -> list[str]:
    """``report``: the earnings report judged with the audit's (``rating``: its owner risk)."""
    currency = report["currency"]
    occupancy = report["inputs"]["occupancy_pct"]
    feasible = [p for p in report["platforms"] if audit_feasible(p["audit_verdict"])]
    out = []
    if not report["power_known"]:
        out.append("Earnings: unknown, the draw under load is unknown; give --wall-load-w to `hostcheck earnings`.")
    elif not feasible:
        out.append("Earnings: no platform is feasible for this machine as it is, so none is priced "
                   "(`hostcheck earnings --facts FILE` shows what it would earn).")
    for p in feasible if report["power_known"] else []:
        year = p["seasons"]["year"]
        if p["price_per_gpu_hour"] is not None:
            said = (f"net {span_text(year['net_per_month'], currency)} a month at {occupancy:g} % occupancy "
                    f"(whole year; break-even {span_text(year['break_even_price'], currency, 3)} per GPU-hour)")
        else:
            said = f"break-even {span_text(year['break_even_price'], currency, 3)} per GPU-hour at {occupancy:g} % occupancy"
        out.append(f"Earnings on {p['title']} ({p['audit_verdict']}): {said}.")
    if rating in OWNER_RISK_STOPS and out:
        out.append(f"Owner risk is {rating.upper()}: earnings do not change the headline; do not host on this "
                   "machine as it is.")
    return out
