"""The earnings report as HTML (the HTML report's earnings section, :mod:`hostcheck.render.html`): the headline, net per month per platform at a glance, the
chart (net against occupancy, winter and summer), then each platform's figures, the inputs,
power and constants on demand. The lines are the terminal report's own
(:mod:`hostcheck.render.earnings`); only their layout differs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hostcheck.earnings.headline import money, span_text
from hostcheck.earnings.report import audit_feasible
from hostcheck.render.earnings import POWER_NAMES
from hostcheck.render.earnings.platform import platform_lines
from hostcheck.render.html.markup import Markup, el, link
from hostcheck.render.html.page import fold, header_card, page, section, table
from hostcheck.render.html.svg import earnings_chart

WIDTH = 72  # the terminal lines' width: tables inside a platform's section are laid out to it


def _sources(value: Any) -> Iterator[dict[str, Any]]:
    """Every source cited anywhere in ``value`` (a platform's fee, payout, caveats, bid)."""
    if isinstance(value, dict):
        if {"title", "url", "checked"} <= value.keys():
            yield value
            return
        for item in value.values():
            yield from _sources(item)
    elif isinstance(value, list):
        for item in value:
            yield from _sources(item)


def source_list(value: Any) -> Markup:
    seen: dict[str, dict[str, Any]] = {}
    for src in _sources(value):
        seen.setdefault(str(src["url"]), src)
    items = [el("li", link(str(s["url"]), str(s["title"])), f" (read {s['checked']})") for s in seen.values()]
    return el("ul", items) if items else Markup("")


def _lines(lines: list[tuple[str, int]]) -> list[Markup]:
    """Terminal lines as paragraphs; laid-out blocks (tables) as preformatted text."""
    out: list[Markup] = []
    block: list[str] = []
    for text, level in [*lines, ("", 0)]:
        if level < 0:
            block.append(text)
            continue
        if block:
            out.append(el("pre", "\n".join(block)))
            block = []
        if text.strip():
            out.append(el("p", text.strip()) if level == 0 else el("p", el("small", text.strip())))
    return out


def charted_platform(report: dict[str, Any]) -> dict[str, Any] | None:
    """The platform the terminal draws its chart for: the first the audit finds feasible, else
    the first priced one."""
    priced = [p for p in report["platforms"] if p.get("priced", True)]
    feasible = [p for p in priced if audit_feasible(p.get("audit_verdict"))]
    return (feasible or priced or [None])[0]


def earnings_header(report: dict[str, Any], command: str) -> Markup:
    rows = [("hostcheck", report["tool"]["version"]), ("command", command or "hostcheck earnings"),
            ("generated", report["generated_at"]), ("machine", report["machine"]["from"])]
    return header_card("hostcheck earnings", rows)


def earnings_body(report: dict[str, Any]) -> list[Markup]:
    currency = str(report["currency"])
    out = [el("p", report["headline"], class_="answer")]
    rows = []
    for p in report["platforms"]:
        year = (p.get("seasons") or {}).get("year")
        rows.append([p["title"], p.get("audit_verdict") or "", span_text(year["net_per_month"], currency) if year else
                     "not priced", span_text(year["break_even_occupancy_pct"], currency, 1, " %", none="not reached")
                     if year else ""])
    out.append(section("Net per month, by platform", table(["platform", "audit", "net per month (year)",
                                                            "break-even occupancy"], rows), id_="earnings"))
    charted = charted_platform(report)
    if charted is not None and charted.get("chart"):
        out.append(section(f"Net against occupancy: {charted['title']}", earnings_chart(charted["chart"], currency)))
    for p in report["platforms"]:
        body = _lines(platform_lines(p, currency, False, WIDTH, with_chart=False))
        chart = earnings_chart(p["chart"], currency) if p.get("chart") and p is not charted else None
        out.append(fold(p["title"], body[1:], chart, el("h3", "Sources"), source_list(p)))
    inputs = report["inputs"]
    power = [f"{label}: {'unknown' if fig['watts'] is None else format(fig['watts'], '.0f') + ' W'} "
             f"({fig['provenance']}): {fig['how']}" for key, label in POWER_NAMES.items()
             if (fig := report["power"].get(key)) is not None]
    constants = [el("li", f"{c['name']} = {c['value']} {c['unit']}: {c['note']} — ",
                    link(str(c["source"]["url"]), str(c["source"]["title"]))) for c in report["constants"]]
    tariff = ", ".join(f"{q['from_hour']:02d}-{q['to_hour']:02d} h {q['price_per_kwh']:g}"
                       for q in inputs["electricity"]["periods"])
    given = [f"electricity {tariff} {currency}/kWh", f"occupancy {inputs['occupancy_pct']:g} %",
             f"{report['machine']['gpus']} GPU{'s' if report['machine']['gpus'] != 1 else ''}"
             + (f" ({report['machine']['gpu_name']})" if report["machine"].get("gpu_name") else ""),
             f"hardware {money(inputs['hardware_value'], currency)}" if inputs.get("hardware_value") else None]
    out.append(fold("Inputs, power and constants", el("ul", [el("li", g) for g in given if g]),
                    el("h3", "Power"), el("ul", [el("li", line) for line in power]),
                    el("h3", "Constants"), el("ul", constants)))
    if report["notes"]:
        out.append(fold("Notes", el("ul", [el("li", n) for n in report["notes"]])))
    return out


def render_earnings_html(report: dict[str, Any], *, command: str = "") -> str:
    """The whole document of `hostcheck earnings --format html`."""
    return page("hostcheck earnings", [earnings_header(report, command), *earnings_body(report)])
