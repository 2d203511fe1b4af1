"""The earnings report as terminal text or Markdown, with a small block chart of net per month
against occupancy (winter and summer). Plain text on purpose: the same chart reads the same in
a terminal, a Markdown code block and a forum post."""

from __future__ import annotations

from typing import Any

from hostcheck.earnings.report import ACCEPTS, audit_feasible, money, span_text
from hostcheck.render.columns import columns
from hostcheck.render.escape import escape_tree
from hostcheck.render.terminal import terminal_width, wrap

CHART_WIDTH = 24
BLOCKS = " ▏▎▍▌▋▊▉█"
NOT_PUBLISHED = "not published"
SEASON_TITLES = {"winter": "winter (heating months)", "summer": "summer (cooling months)",
                 "other": "other months", "year": "whole year, per month"}


def _bar(value: float, scale: float, length: int = CHART_WIDTH) -> str:
    """A bar of eighth-blocks, ``value / scale`` of ``length`` long."""
    if scale <= 0:
        return ""
    eighths = round(abs(value) / scale * length * 8)
    full, part = divmod(eighths, 8)
    return "█" * full + (BLOCKS[part] if part else "")


def chart_lines(chart: dict[str, Any], currency: str, width: int = 80) -> list[str]:
    """Net per month against occupancy: losses grow left of the axis, gains right of it; the
    bars as long as the width leaves (at most CHART_WIDTH each side)."""
    series = [(name, chart[name]) for name in ("winter", "summer", "year") if chart.get(name)]
    if not series:
        return []
    if chart.get("winter") and chart.get("summer"):
        series = [s for s in series if s[0] != "year"]
    scale = max((abs(v) for _, values in series for v in values), default=0.0) or 1.0
    label = {"winter": "W", "summer": "S", "year": "Y"}
    number = max(len(f"{v:,.2f}") for _, values in series for v in values)
    bar = max(4, min(CHART_WIDTH, (width - 8 - 3 - number) // 2))
    out = [*wrap(f"net per month ({currency}) against occupancy, fee {chart['fee_pct']:g} %: "
                 + ", ".join(f"{label[n]} = {n}" for n, _ in series), width),
           f"{'occupancy':9}{'loss':>{bar}} | gain"]
    for i, occupancy in enumerate(chart["occupancy_pct"]):
        for name, values in series:
            v = values[i]
            left = _bar(v, scale, bar)[::-1] if v < 0 else ""
            right = _bar(v, scale, bar) if v >= 0 else ""
            head = f"{occupancy:5.0f} % {label[name]}" if name == series[0][0] else f"{'':8}{label[name]}"
            out.append(f"{head} {left:>{bar}}|{right:<{bar}} {v:,.2f}".rstrip())
    return out


POWER_NAMES = {"wall_idle": "whole machine, idle (listed)", "wall_load": "whole machine, under load (rented)",
               "gpu_idle": "GPU idle", "gpu_load": "GPU under load", "cpu_package": "CPU package",
               "rest_of_system": "rest of the system"}


def _power_lines(report: dict[str, Any]) -> list[tuple[str, int]]:
    out = []
    for key, label in POWER_NAMES.items():
        fig = report["power"].get(key)
        if fig is None:
            continue
        watts = "unknown" if fig["watts"] is None else f"{fig['watts']:.0f} W"
        how = fig["how"] if fig["how"].startswith(fig["provenance"]) else f"{fig['provenance']}: {fig['how']}"
        out.append((f"{label}: {watts}, {how}", 1))
    return out


def _fee_text(fee: dict[str, Any]) -> str:
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


Line = tuple[str, int]  # text and its indent level; a level of -1 is laid out already (tables, the chart)


def _platform_lines(p: dict[str, Any], currency: str, md: bool, width: int, with_chart: bool = True) -> list[Line]:
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
                f" ({p['price_from']}); fee {_fee_text(fee)}", 0))
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


def render_earnings(report: dict[str, Any], *, markdown: bool = False, width: int | None = None) -> str:
    report = escape_tree(report)
    width = terminal_width() if width is None else width
    currency = report["currency"]
    md = markdown
    out: list[Line] = [(f"{'# ' if md else ''}hostcheck earnings — {report['machine']['from']}", 0), ("", 0),
                       (report["headline"], 0), ("", 0)]
    i = report["inputs"]
    e = i["electricity"]
    if len(e["periods"]) == 1:
        tariff = f"{e['peak_per_kwh']:g} {currency}/kWh flat"
    else:
        tariff = ", ".join(f"{p['from_hour']:02d}-{p['to_hour']:02d} h {p['price_per_kwh']:g}" for p in e["periods"])
        tariff += f" {currency}/kWh (hour-weighted mean {e['mean_per_kwh']:.4f}: rentals assumed spread over the day)"
    out.append((f"{'## ' if md else ''}Inputs", 0))
    out.append((f"electricity {tariff}; occupancy {i['occupancy_pct']:g} %; {report['machine']['gpus']} GPU(s)"
                + (f" ({report['machine']['gpu_name']})" if report["machine"].get("gpu_name") else ""), 0))
    heat = i["heating"]
    if heat["kind"] != "none":
        out.append((f"heating {heat['kind']} in months {heat['months']}, {heat['share_pct']:g} % of the heat useful", 0))
    if i["cooling"]["months"]:
        out.append((f"air conditioning in months {i['cooling']['months']}, COP {i['cooling']['cop']:g}, "
                    f"{i['cooling']['share_pct']:g} % of the heat removed by it", 0))
    if i["hardware_value"]:
        out.append((f"hardware {money(i['hardware_value'], currency)} over {i['remaining_life_years']:g} years of "
                    "round-the-clock use (depreciation counts rented hours only)", 0))
    if i["baseline_w"]:
        out.append((f"baseline {i['baseline_w']:g} W the machine would draw anyway (not charged to hosting)", 0))
    out += [("", 0), (f"{'## ' if md else ''}Power", 0), *_power_lines(report), ("", 0)]
    if report["constants"]:
        out.append((f"{'## ' if md else ''}Constants", 0))
        for c in report["constants"]:
            label = "default" if c["used_default"] else "overridden"
            inference = " [inference]" if c["inference"] else ""
            override = f" (override: {c['option']})" if c.get("option") else ""
            out.append((f"{c['name']} = {c['value']} {c['unit']}: {label}{inference}{override}; {c['note']}", 1))
            out.append((f"source: {c['source']['title']} <{c['source']['url']}> (read {c['source']['checked']})", 2))
        out.append(("", 0))
    if not report["machine"].get("audit_headline") and len(report["platforms"]) > 1:
        out.append((f"{'## ' if md else ''}Platforms by the machines they take", 0))
        for group in ACCEPTS:
            names = [p["title"] for p in report["platforms"] if group in p["accepts"]]
            if names:
                out.append((f"{group}: {', '.join(names)}", 1))
        out.append(("", 0))
    # One chart: for the first platform the audit finds feasible (else the first priced one); the
    # JSON report has every platform's, and --platform NAME draws another's.
    priced = [p for p in report["platforms"] if p.get("priced", True)]
    feasible = [p for p in priced if audit_feasible(p.get("audit_verdict"))]
    charted = (feasible or priced or [None])[0]
    for p in report["platforms"]:
        out += [*_platform_lines(p, currency, md, width, with_chart=p is charted), ("", 0)]
    if len(report["platforms"]) > 1 and charted is not None and charted.get("chart"):
        report["notes"].append(f"the chart is drawn for {charted['title']}; --platform NAME draws another's")
    if report["notes"]:
        out.append((f"{'## ' if md else ''}Notes", 0))
        out += [(n, 1) for n in report["notes"]]
    if md:
        return _markdown([text if level < 0 else "  " * level + text for text, level in out]) + "\n"
    lines: list[str] = []
    for text, level in out:
        if level < 0 or not text:
            lines.append(text.rstrip())
        else:
            lines += wrap(text, width, first="  " * level, indent="  " * level + "  ")
    return "\n".join(lines).rstrip() + "\n"


def _markdown(lines: list[str]) -> str:
    """Terminal lines as Markdown: headings and tables set apart by blank lines, the chart kept
    in its code block, every other line a list item (so lines never run together)."""
    out: list[str] = []
    in_code = in_table = False
    seen_heading = False

    def blank() -> None:
        if out and out[-1] != "":
            out.append("")

    for line in lines:
        if line == "```":
            if not in_code:
                blank()
            out.append(line)
            in_code = not in_code
            if not in_code:
                out.append("")
            continue
        if in_code:
            out.append(line)
            continue
        if line.startswith("|"):
            if not in_table:
                blank()
            in_table = True
            out.append(line)
            continue
        if in_table:
            in_table = False
            out.append("")
        if not line.strip():
            continue
        if line.startswith("#"):
            blank()
            out += [line, ""]
            seen_heading = seen_heading or line.startswith("## ")
        elif not seen_heading:
            out += [line, ""]  # the headline: a paragraph of its own
        else:
            out.append(f"- {line.strip()}")
    return "\n".join(out).rstrip()
