"""A small block chart of net per month against occupancy (winter and summer, or the year).
Plain text on purpose: the same chart reads the same in a terminal, a Markdown code block and
a forum post."""

from __future__ import annotations

from typing import Any

from hostcheck.render.terminal import wrap

CHART_WIDTH = 24
BLOCKS = " ▏▎▍▌▋▊▉█"


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
