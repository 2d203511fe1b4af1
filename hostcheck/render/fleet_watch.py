"""The fleet's reliability rehearsals side by side, as terminal text or Markdown."""

from __future__ import annotations

from hostcheck.fleet.watch import WatchRow
from hostcheck.render.escape import escape_tree

SHORT = {"meets": "ok", "below": "BELOW", "unknown": "??"}


def _rule_cell(row: WatchRow, rule: str) -> str:
    part = row.platforms.get(rule)
    if part is None:
        return "-"
    return SHORT[part.verdict] + ("" if part.score is None else f" {part.score * 100:.2f}%")


def _cells(row: WatchRow, rules: list[str]) -> list[str]:
    if not row.readable:
        return [row.host, "NO REPORT", "", "", "", row.reason or ""] + [""] * len(rules)
    outages = ", ".join(f"{cause} {n}" for cause, n in row.outages.items()) or "none"
    down = f"{sum(row.down_minutes.values()):.0f}" if row.down_minutes else "0"
    uptime = "?" if row.uptime is None else f"{row.uptime * 100:.2f}%"
    days = "" if row.observed_days is None else f"{row.observed_days:g}"
    return [row.host, uptime, days, outages, down, ""] + [_rule_cell(row, r) for r in rules]


HEADERS = ["host", "uptime", "days", "outages by cause", "down min", "note"]


def watch_table(rows: list[WatchRow], markdown: bool = False) -> str:
    rows = escape_tree(rows)
    rules = sorted({r for row in rows for r in row.platforms})
    headers = HEADERS + rules
    body = [_cells(row, rules) for row in rows]
    legend = "ok = meets the rule, BELOW = below it, ?? = not enough data yet; worst host first"
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]
        return "\n".join(lines) + f"\n\n{legend}.\n"
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() for cells in body]
    return "\n".join(lines) + f"\n\n{legend}\n"
