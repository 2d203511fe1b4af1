"""The earnings report as terminal text or Markdown: the inputs, power and constants, the
platforms grouped by the machines they take, then each platform's section (platform.py) with
one chart (chart.py) and the notes."""

from __future__ import annotations

from typing import Any

from hostcheck.earnings.headline import money, span_text
from hostcheck.earnings.report import ACCEPTS, audit_feasible
from hostcheck.render.earnings.markdown import as_markdown
from hostcheck.render.earnings.platform import Line, fee_text, platform_lines
from hostcheck.render.escape import escape_tree
from hostcheck.render.terminal import terminal_width, wrap
from hostcheck.wording import counted

POWER_NAMES = {"wall_idle": "whole machine, idle (listed)", "wall_load": "whole machine, under load (rented)",
               "gpu_idle": "GPU idle", "gpu_load": "GPU under load", "cpu_package": "CPU package",
               "rest_of_system": "rest of the system"}


def _power_lines(report: dict[str, Any]) -> list[Line]:
    out = []
    for key, label in POWER_NAMES.items():
        fig = report["power"].get(key)
        if fig is None:
            continue
        watts = "unknown" if fig["watts"] is None else f"{fig['watts']:.0f} W"
        how = fig["how"] if fig["how"].startswith(fig["provenance"]) else f"{fig['provenance']}: {fig['how']}"
        out.append((f"{label}: {watts}, {how}", 1))
    return out


def _inputs_line(report: dict[str, Any]) -> str:
    currency = report["currency"]
    i = report["inputs"]
    e = i["electricity"]
    if len(e["periods"]) == 1:
        tariff = f"{e['peak_per_kwh']:g} {currency}/kWh flat"
    else:
        tariff = ", ".join(f"{p['from_hour']:02d}-{p['to_hour']:02d} h {p['price_per_kwh']:g}" for p in e["periods"])
        tariff += f" {currency}/kWh (hour-weighted mean {e['mean_per_kwh']:.4f}: rentals assumed spread over the day)"
    return (f"electricity {tariff}; occupancy {i['occupancy_pct']:g} %; {counted(report['machine']['gpus'], 'GPU')}"
            + (f" ({report['machine']['gpu_name']})" if report["machine"].get("gpu_name") else ""))


def _money_line(p: dict[str, Any], currency: str) -> str:
    """A platform's answer in one sentence: net a month over the year, break-even, its fee."""
    if not p.get("priced", True):
        return f"not priced ({', '.join(p['accepts'])}: --platform {p['platform']} prices it)"
    year = (p.get("seasons") or {}).get("year")
    fee = fee_text(p["fee"])
    if not year:
        return f"no money figure (the draw under load is unknown); fee {fee}"
    said = (f"net {span_text(year['net_per_month'], currency)} a month over the year; break-even "
            f"{span_text(year['break_even_price'], currency, 3, none='no price')} per GPU-hour or "
            f"{span_text(year['break_even_occupancy_pct'], currency, 1, ' %', none='not reached')} occupancy; "
            f"fee {fee}")
    return said


def _summary(report: dict[str, Any], md: bool) -> list[Line]:
    """The answer: the headline, the inputs, one line per platform (platforms whose figures
    are the same said together), what was not priced, and where the rest is."""
    currency = report["currency"]
    out: list[Line] = [(f"{'# ' if md else ''}hostcheck earnings — {report['machine']['from']}", 0), ("", 0),
                       (report["headline"], 0), ("", 0), (_inputs_line(report), 0)]
    if report.get("market"):
        from hostcheck.render.market import market_lines

        out += market_lines(report["market"])
    groups: dict[str, list[str]] = {}
    for p in report["platforms"]:
        # A platform the audit does not find feasible says so by its name: its figures are for comparison.
        shut = audit_feasible(p.get("audit_verdict")) is False
        title = f"{p['title']} ({p['audit_verdict'].rsplit(': ', 1)[-1]} as it is)" if shut else p["title"]
        groups.setdefault(_money_line(p, currency), []).append(title)
    if groups:
        out.append(("", 0))
        out += [(f"{' and '.join(titles) if len(titles) == 2 else ', '.join(titles)}: {line}", 0)
                for line, titles in groups.items()]
    said = [n for n in report["notes"] if n.startswith(SUMMARY_NOTES)]
    if said:
        out += [("", 0), *((n[0].upper() + n[1:] + ".", 0) for n in said)]
    out += [("", 0), ("Power and how it was estimated, the constants, each season, the sensitivity table, the chart, "
                      "payout terms and every source: add --details.", 0)]
    return out


SUMMARY_NOTES = ("not priced", "the audit counts no working NVIDIA GPU", "--gpus")
"""The notes that change what the summary's figures mean; the rest are in --details."""


def render_earnings(report: dict[str, Any], *, markdown: bool = False, width: int | None = None,
                    details: bool = False) -> str:
    """The answer (headline, inputs, a line per platform); with ``details`` every derivation:
    power, constants, each platform's seasons, sensitivity table, chart, payout and sources."""
    report = escape_tree(report)
    width = terminal_width() if width is None else width
    currency = report["currency"]
    md = markdown
    if not details:
        return _lay_out(_summary(report, md), md, width)
    out: list[Line] = [(f"{'# ' if md else ''}hostcheck earnings — {report['machine']['from']}", 0), ("", 0),
                       (report["headline"], 0), ("", 0)]
    i = report["inputs"]
    out.append((f"{'## ' if md else ''}Inputs", 0))
    out.append((_inputs_line(report), 0))
    if report.get("market"):
        from hostcheck.render.market import market_lines

        out += market_lines(report["market"])
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
        out += [*platform_lines(p, currency, md, width, with_chart=p is charted), ("", 0)]
    if len(report["platforms"]) > 1 and charted is not None and charted.get("chart"):
        report["notes"].append(f"the chart is drawn for {charted['title']}; --platform NAME draws another's")
    if report["notes"]:
        out.append((f"{'## ' if md else ''}Notes", 0))
        out += [(n, 1) for n in report["notes"]]
    return _lay_out(out, md, width)


def _lay_out(out: list[Line], md: bool, width: int) -> str:
    if md:
        return as_markdown([text if level < 0 else "  " * level + text for text, level in out]) + "\n"
    lines: list[str] = []
    for text, level in out:
        if level < 0 or not text:
            lines.append(text.rstrip())
        else:
            # hostcheck's own citations: an address stands whole on a line of its own, never cut.
            lines += wrap(text, width, first="  " * level, indent="  " * level + "  ", whole_urls=True)
    return "\n".join(lines).rstrip() + "\n"
