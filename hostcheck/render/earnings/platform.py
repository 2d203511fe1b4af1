"""One platform's section of the earnings report: price and fee, the seasons' figures, the
sensitivity table, the chart, the minimum-bid check and the payout terms, with their sources."""

from __future__ import annotations

from typing import Any

from hostcheck.earnings.headline import money, span_text
from hostcheck.earnings.report import NOT_PUBLISHED, audit_feasible
from hostcheck.render.columns import columns
from hostcheck.render.earnings.chart import chart_lines

SEASON_TITLES = {"winter": "winter (heating months)", "summer": "summer (cooling months)",
                 "other": "other months", "year": "whole year, per month"}

Line = tuple[str, int]  # text and its indent level; a level of -1 is laid out already (tables, the chart)


def fee_text(fee: dict[str, Any]) -> str:
    if fee["status"] == "net-rate":
        return "0 % (the rate shown to hosts is already net of the fee)"
    if fee["low_pct"] == fee["high_pct"]:
        return f"{fee['low_pct']:g} %"
    return f"{fee['low_pct']:g}-{fee['high_pct']:g} % ({fee['status'].replace('-', ' ')})"


def _payout_text(pay: dict[str, Any]) -> str:
    """The payout's published parts, then what is not published, named once."""
    parts = {"minimum": pay["minimum"], "form": pay["form"], "currency": pay["currency"],
             "schedule": pay["schedule"], "expiry": pay["expiry"]}
    said = [f"{name} {value}" if name != "currency" else value for name, value in parts.items()
            if value != NOT_PUBLISHED]
    missing = [name for name, value in parts.items() if value == NOT_PUBLISHED]
    return "; ".join([*said, *([f"not published: {', '.join(missing)}"] if missing else [])])


def platform_lines(p: dict[str, Any], currency: str, md: bool, width: int, with_chart: bool = True) -> list[Line]:
    fee = p["fee"]
    verdict = f" — audit: {p['audit_verdict']}" if p.get("audit_verdict") else ""
    out: list[Line] = [(f"{'### ' if md else ''}{p['title']}{verdict}", 0)]
    if not p.get("priced", True):
        return out + [(f"{', '.join(p['accepts']).capitalize()}: not priced (--platform {p['platform']} prices it "
                       "for a host already on it).", 0)]
    out.append(("", 0))
    if audit_feasible(p.get("audit_verdict")) is False:
        said = p["audit_verdict"].rsplit(": ", 1)[-1]
        out += [(f"{said} for this machine as it is (the audit): the figures below are what it would earn once the "
                 "platform accepts it, for comparison only; the headline quotes none of them", 0), ("", 0)]
    price = p["price_per_gpu_hour"]
    out.append((f"price {money(price, currency, 3) if price is not None else 'not given'} per GPU-hour"
                f" ({p['price_from']}); fee {fee_text(fee)}", 0))
    if p.get("price_set_by") == "platform" or price is None:
        out.append((f"pricing: {p['pricing_note']}", 1))
    if fee["status"] != "published":
        out.append((f"fee: {fee['why']}", 1))
    if fee.get("source"):
        out.append((f"source: {fee['source']['title']} <{fee['source']['url']}> (read {fee['source']['checked']})", 1))
    seasons = p.get("seasons")
    if seasons:
        out.append(("", 0))
        for name, season in seasons.items():
            months = "" if name == "year" else f" ({season['months']} months)"
            out.append((f"{SEASON_TITLES[name]}{months}: net {span_text(season['net_per_month'], currency)}; "
                        f"break-even {span_text(season['break_even_price'], currency, 3, none='no price')} per GPU-hour, "
                        f"or {span_text(season['break_even_occupancy_pct'], currency, 1, ' %', none='not reached')} "
                        "occupancy", 0))
        if p.get("year_total"):
            out.append((f"whole year: {span_text(p['year_total'], currency)}", 0))
        parts = p.get("at_given")
        if parts:
            out.append((f"an average month at the given occupancy (worst case): revenue {money(parts['revenue'], currency)}"
                        f", electricity {money(parts['electricity'], currency)} for {parts['extra_kwh']:.1f} kWh"
                        f", depreciation {money(parts['depreciation'], currency)}"
                        f", heat credit {money(parts['heat_credit'], currency)}"
                        f", cooling penalty {money(parts['cooling_penalty'], currency)}", 0))
    sens = p.get("sensitivity")
    if sens:
        out += [("", 0), (f"net per month over the year (fee {sens['fee_pct']:g} %): occupancy down, price per "
                          "GPU-hour across", 0)]
        header = ("occupancy", *(f"{x:.3f}" for x in sens["price_per_gpu_hour"]))
        rows = [(f"{u:g} %", *(f"{v:,.2f}" for v in values))
                for u, values in zip(sens["occupancy_pct"], sens["net_per_month"], strict=True)]
        out += [(line, -1) for line in _table(header, rows, md, width)]
    chart = p.get("chart") if with_chart else None
    if chart:
        lines = chart_lines(chart, currency, width)
        out += [("", 0), *((line, -1) for line in (["```", *lines, "```"] if md else lines))]
    bid = p.get("min_bid")
    if bid:
        floor = money(bid["floor_per_gpu_hour"], currency, 3)
        if bid["min_bid"] is None:
            said = f"set the minimum bid to at least {floor} per GPU-hour (power under load at the dearest hour)"
        elif bid["covers"]:
            said = f"your minimum bid {money(bid['min_bid'], currency, 3)} covers the power cost under load ({floor})"
        else:
            said = (f"your minimum bid {money(bid['min_bid'], currency, 3)} does NOT cover the power cost under load"
                    f" ({floor} per GPU-hour): an interruptible rental at that bid loses money")
        out += [("", 0), (f"minimum bid: {said}. {bid['note']} <{bid['source']['url']}>", 0)]
    pay = p["payout"]
    out += [("", 0), (f"payout: {_payout_text(pay)}", 0)]
    for c in pay["caveats"]:
        out.append((f"caveat: {c['text']}", 1))
        if c["source"] != pay["source"]:
            out.append((f"source: {c['source']['title']} <{c['source']['url']}> (read {c['source']['checked']})", 2))
    out.append((f"source: {pay['source']['title']} <{pay['source']['url']}> (read {pay['source']['checked']})", 1))
    return out


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], md: bool, width: int) -> list[str]:
    if md:
        return [f"| {' | '.join(header)} |", f"|{'|'.join('---' for _ in header)}|",
                *(f"| {' | '.join(r)} |" for r in rows)]
    return columns(header, rows, width, right=range(1, len(header)))
