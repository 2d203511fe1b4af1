"""Charts as inline SVG, drawn from the data the terminal's charts are drawn from: the uptime
strip from :func:`hostcheck.render.watch.timeline_rows` (the same cells, the same worst state per
cell), the earnings chart from the report's ``chart`` (net per month against occupancy)."""

from __future__ import annotations

from typing import Any

from hostcheck.render.html.markup import Markup, el

LABEL_W = 46
CELL_W = 7
ROW_H = 16


def _state_class(state: str) -> str:
    return "s-" + state.replace("_", "-").replace(" ", "-")


def uptime_strip(rows: list[tuple[str, list[str]]], ticks: list[tuple[int, str]], title: str) -> Markup:
    """One row per day (or hour) of cells, each the worst state in it; runs of one state are
    one rectangle. ``ticks`` are (cell index, label) along the top."""
    cells_n = max((len(cells) for _, cells in rows), default=0)
    width = LABEL_W + cells_n * CELL_W + 2
    height = ROW_H * (len(rows) + 1) + 4
    parts: list[Markup] = [el("title", title)]
    for index, label in ticks:
        parts.append(el("text", label, x=LABEL_W + index * CELL_W, y=12))
    for r, (label, cells) in enumerate(rows):
        y = ROW_H * (r + 1) + 2
        parts.append(el("text", label, x=0, y=y + 11))
        start = 0
        for i in range(1, len(cells) + 1):
            if i < len(cells) and cells[i] == cells[start]:
                continue
            if cells[start]:  # an empty state: outside the window, nothing drawn
                parts.append(el("rect", el("title", f"{label}: {cells[start]}"), x=LABEL_W + start * CELL_W, y=y,
                                width=(i - start) * CELL_W, height=ROW_H - 3, class_=_state_class(cells[start])))
            start = i
    return el("svg", parts, viewBox=f"0 0 {width} {height}", role="img", aria_label=title,
              xmlns="http://www.w3.org/2000/svg")


def swatch(state: str) -> Markup:
    return el("svg", el("rect", x=0, y=0, width=10, height=10, class_=_state_class(state)), viewBox="0 0 10 10",
              aria_hidden="true", xmlns="http://www.w3.org/2000/svg")


SERIES_NAMES = {"winter": "winter (heating months)", "summer": "summer (cooling months)", "year": "whole year"}


def earnings_chart(chart: dict[str, Any], currency: str) -> Markup:
    """Net per month (y) against occupancy (x), one line per season, the break-even line at 0."""
    series = [(name, chart[name]) for name in ("winter", "summer", "year") if chart.get(name)]
    if chart.get("winter") and chart.get("summer"):
        series = [s for s in series if s[0] != "year"]
    xs = [float(x) for x in chart.get("occupancy_pct") or []]
    if not series or not xs:
        return Markup("")
    values = [float(v) for _, vs in series for v in vs]
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0
    left, top, w, h = 40, 10, 290, 150
    x_of = lambda x: left + (x - min(xs)) / ((max(xs) - min(xs)) or 1) * w  # noqa: E731
    y_of = lambda v: top + (high - v) / span * h  # noqa: E731
    parts: list[Markup] = [el("title", f"Net per month ({currency}) against occupancy")]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        v = low + span * frac
        parts.append(el("line", x1=left, x2=left + w, y1=y_of(v), y2=y_of(v), class_="grid"))
        parts.append(el("text", f"{v:,.0f}", x=2, y=y_of(v) + 3))
    parts.append(el("line", x1=left, x2=left + w, y1=y_of(0), y2=y_of(0), class_="axis"))
    for x in (xs[0], xs[len(xs) // 2], xs[-1]):
        parts.append(el("text", f"{x:g} %", x=x_of(x) - 12, y=top + h + 16))
    for name, vs in series:
        points = " ".join(f"{x_of(x):.1f},{y_of(float(v)):.1f}" for x, v in zip(xs, vs, strict=False))
        parts.append(el("polyline", el("title", SERIES_NAMES[name]), points=points, class_=f"ln ln-{name}"))
    chart_svg = el("svg", parts, viewBox=f"0 0 {left + w + 24} {top + h + 22}", role="img",
                   aria_label=f"net per month in {currency} against occupancy", xmlns="http://www.w3.org/2000/svg")
    legend = el("ul", [el("li", el("svg", el("line", x1=0, x2=10, y1=5, y2=5, class_=f"ln ln-{name}"),
                                   viewBox="0 0 10 10", aria_hidden="true", xmlns="http://www.w3.org/2000/svg"),
                              SERIES_NAMES[name]) for name, _ in series], class_="legend")
    return el("figure", chart_svg, legend,
              el("figcaption", f"Net per month ({currency}) against occupancy, fee {chart.get('fee_pct', 0):g} %; "
                 "below the line at 0 hosting costs more than it earns."))
