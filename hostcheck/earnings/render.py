"""The earnings report as terminal text or Markdown, with a small block chart of net per month
against occupancy (winter and summer). Plain text on purpose: the same chart reads the same in
a terminal, a Markdown code block and a forum post."""

from __future__ import annotations

from typing import Any

from hostcheck.earnings.report import audit_feasible, money, span_text
from hostcheck.render.escape import escape_tree

CHART_WIDTH = 24
BLOCKS = " ▏▎▍▌▋▊▉█"
SEASON_TITLES = {"winter": "winter (heating months)", "summer": "summer (cooling months)",
                 "other": "other months", "year": "whole year, per month"}


def _bar(value: float, scale: float) -> str:
    """A bar of eighth-blocks, ``value / scale`` of CHART_WIDTH long."""
    if scale <= 0:
        return ""
    eighths = round(abs(value) / scale * CHART_WIDTH * 8)
    full, part = divmod(eighths, 8)
    return "█" * full + (BLOCKS[part] if part else "")


def chart_lines(chart: dict[str, Any], currency: str) -> list[str]:
    """Net per month against occupancy: losses grow left of the axis, gains right of it."""
    series = [(name, chart[name]) for name in ("winter", "summer", "year") if chart.get(name)]
    if not series:
        return []
    if chart.get("winter") and chart.get("summer"):
        series = [s for s in series if s[0] != "year"]
    scale = max((abs(v) for _, values in series for v in values), default=0.0) or 1.0
    label = {"winter": "W", "summer": "S", "year": "Y"}
    out = [f"net per month ({currency}) against occupancy, fee {chart['fee_pct']:g} %:  "
           + "  ".join(f"{label[n]} = {n}" for n, _ in series),
           f"{'occupancy':9} {'loss':>{CHART_WIDTH - 1}} | gain"]
    for i, occupancy in enumerate(chart["occupancy_pct"]):
        for name, values in series:
            v = values[i]
            left = _bar(v, scale)[::-1] if v < 0 else ""
            right = _bar(v, scale) if v >= 0 else ""
            head = f"{occupancy:5.0f} % {label[name]}" if name == series[0][0] else f"{'':8}{label[name]}"
            out.append(f"{head} {left:>{CHART_WIDTH}}|{right:<{CHART_WIDTH}} {v:,.2f}")
    return out


def _power_lines(report: dict[str, Any]) -> list[str]:
    names = {"wall_idle": "whole machine, idle (listed)", "wall_load": "whole machine, under load (rented)",
             "gpu_idle": "GPU idle", "gpu_load": "GPU under load", "cpu_package": "CPU package",
             "rest_of_system": "rest of the system"}
    out = []
    for key, label in names.items():
        fig = report["power"].get(key)
        if fig is None:
            continue
        watts = "unknown" if fig["watts"] is None else f"{fig['watts']:.0f} W"
        how = fig["how"] if fig["how"].startswith(fig["provenance"]) else f"{fig['provenance']}: {fig['how']}"
        out.append(f"  {label:36} {watts:>9}  {how}")
    return out


def _platform_lines(p: dict[str, Any], currency: str, md: bool, with_chart: bool = True) -> list[str]:
    fee = p["fee"]
    fee_text = ("0 % (the rate shown to hosts is already net of the fee)" if fee["status"] == "net-rate"
                else f"{fee['low_pct']:g} %" if fee["low_pct"] == fee["high_pct"]
                else f"{fee['low_pct']:g}-{fee['high_pct']:g} % ({fee['status'].replace('-', ' ')})")
    verdict = f" — audit: {p['audit_verdict']}" if p.get("audit_verdict") else ""
    out = [f"{'### ' if md else ''}{p['title']}{verdict}", ""]
    if audit_feasible(p.get("audit_verdict")) is False:
        said = p["audit_verdict"].rsplit(": ", 1)[-1]
        out += [f"{said} for this machine as it is (the audit): the figures below are what it would earn once the "
                "platform accepts it, for comparison only; the headline quotes none of them", ""]
    price = p["price_per_gpu_hour"]
    out.append(f"price {money(price, currency, 3) if price is not None else 'not given'} per GPU-hour"
               f" ({p['price_from']}); fee {fee_text}")
    if p.get("price_set_by") == "platform" or price is None:
        out.append(f"  pricing: {p['pricing_note']}")
    if fee["status"] != "published":
        out.append(f"  fee: {fee['why']}")
    if fee.get("source"):
        out.append(f"  source: {fee['source']['title']} <{fee['source']['url']}> (read {fee['source']['checked']})")
    seasons = p.get("seasons")
    if seasons:
        rows: list[tuple[str, ...]] = [("", "months", "net per month", "break-even price/GPU-h", "break-even occupancy")]
        for name, s in seasons.items():
            rows.append((SEASON_TITLES[name], str(s["months"]), span_text(s["net_per_month"], currency),
                         span_text(s["break_even_price"], currency, 3, none="no price"),
                         span_text(s["break_even_occupancy_pct"], currency, 1, " %", none="not reached")))
        out += [""] + _table(rows, md)
        if p.get("year_total"):
            out.append(f"whole year: {span_text(p['year_total'], currency)}")
        parts = p.get("at_given")
        if parts:
            out.append(f"an average month at the given occupancy (worst case): revenue {money(parts['revenue'], currency)}"
                       f", electricity {money(parts['electricity'], currency)} for {parts['extra_kwh']:.1f} kWh"
                       f", depreciation {money(parts['depreciation'], currency)}"
                       f", heat credit {money(parts['heat_credit'], currency)}"
                       f", cooling penalty {money(parts['cooling_penalty'], currency)}")
    sens = p.get("sensitivity")
    if sens:
        out += ["", f"net per month over the year (fee {sens['fee_pct']:g} %): occupancy down, price per GPU-hour across"]
        rows = [("occupancy", *(f"{x:.3f}" for x in sens["price_per_gpu_hour"]))]
        for u, values in zip(sens["occupancy_pct"], sens["net_per_month"], strict=True):
            rows.append((f"{u:g} %", *(f"{v:,.2f}" for v in values)))
        out += _table(rows, md)
    chart = p.get("chart") if with_chart else None
    if chart:
        lines = chart_lines(chart, currency)
        out += ["", "```", *lines, "```"] if md else ["", *lines]
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
        out += ["", f"minimum bid: {said}. {bid['note']} <{bid['source']['url']}>"]
    pay = p["payout"]
    out += ["", f"payout: minimum {pay['minimum']}; form {pay['form']}; {pay['currency']}; schedule {pay['schedule']}; "
                f"expiry {pay['expiry']}"]
    for c in pay["caveats"]:
        out.append(f"  caveat: {c['text']}")
        if c["source"] != pay["source"]:
            out.append(f"    source: {c['source']['title']} <{c['source']['url']}> (read {c['source']['checked']})")
    out.append(f"  source: {pay['source']['title']} <{pay['source']['url']}> (read {pay['source']['checked']})")
    return out


def _table(rows: list[tuple[str, ...]], md: bool) -> list[str]:
    if md:
        head, *body = rows
        return [f"| {' | '.join(head)} |", f"|{'|'.join('---' for _ in head)}|",
                *(f"| {' | '.join(r)} |" for r in body)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in rows]


def render_earnings(report: dict[str, Any], *, markdown: bool = False) -> str:
    report = escape_tree(report)
    currency = report["currency"]
    md = markdown
    out = [f"{'# ' if md else ''}hostcheck earnings — {report['machine']['from']}", "", report["headline"], ""]
    i = report["inputs"]
    e = i["electricity"]
    if len(e["periods"]) == 1:
        tariff = f"{e['peak_per_kwh']:g} {currency}/kWh flat"
    else:
        tariff = ", ".join(f"{p['from_hour']:02d}-{p['to_hour']:02d} h {p['price_per_kwh']:g}" for p in e["periods"])
        tariff += f" {currency}/kWh (hour-weighted mean {e['mean_per_kwh']:.4f}: rentals assumed spread over the day)"
    out.append(f"{'## ' if md else ''}Inputs")
    out.append(f"electricity {tariff}; occupancy {i['occupancy_pct']:g} %; {report['machine']['gpus']} GPU(s)"
               + (f" ({report['machine']['gpu_name']})" if report["machine"].get("gpu_name") else ""))
    heat = i["heating"]
    if heat["kind"] != "none":
        out.append(f"heating {heat['kind']} in months {heat['months']}, {heat['share_pct']:g} % of the heat useful")
    if i["cooling"]["months"]:
        out.append(f"air conditioning in months {i['cooling']['months']}, COP {i['cooling']['cop']:g}, "
                   f"{i['cooling']['share_pct']:g} % of the heat removed by it")
    if i["hardware_value"]:
        out.append(f"hardware {money(i['hardware_value'], currency)} over {i['remaining_life_years']:g} years of "
                   "round-the-clock use (depreciation counts rented hours only)")
    if i["baseline_w"]:
        out.append(f"baseline {i['baseline_w']:g} W the machine would draw anyway (not charged to hosting)")
    out += ["", f"{'## ' if md else ''}Power", *_power_lines(report), ""]
    if report["constants"]:
        out.append(f"{'## ' if md else ''}Constants")
        for c in report["constants"]:
            label = "default" if c["used_default"] else "overridden"
            inference = " [inference]" if c["inference"] else ""
            override = f" (override: {c['option']})" if c.get("option") else ""
            out.append(f"  {c['name']} = {c['value']} {c['unit']}: {label}{inference}{override}; {c['note']}")
            out.append(f"    source: {c['source']['title']} <{c['source']['url']}> (read {c['source']['checked']})")
        out.append("")
    # One chart: for the first platform the audit finds feasible (else the first shown); the JSON
    # report has every platform's, and --platform NAME draws another's.
    feasible = [p for p in report["platforms"] if audit_feasible(p.get("audit_verdict"))]
    charted = (feasible or report["platforms"] or [None])[0]
    for p in report["platforms"]:
        out += [*_platform_lines(p, currency, md, with_chart=p is charted), ""]
    if len(report["platforms"]) > 1 and charted is not None and charted.get("chart"):
        report["notes"].append(f"the chart is drawn for {charted['title']}; --platform NAME draws another's")
    if report["notes"]:
        out.append(f"{'## ' if md else ''}Notes")
        out += [f"  {n}" for n in report["notes"]]
    return (_markdown(out) if md else "\n".join(out).rstrip()) + "\n"


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
