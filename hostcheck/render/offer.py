"""The offer preview as a terminal table, markdown or JSON (values from facts are escaped)."""

from __future__ import annotations

from typing import Any

from hostcheck.measure.offer import Label, Offer
from hostcheck.render.escape import escape_text
from hostcheck.render.markdown_escape import markdown_tree
from hostcheck.safeio import dumps

POWER_ROWS = (
    ("gpu_idle", "GPU, idle"), ("gpu_load", "GPU, under load"), ("cpu_package", "CPU package"),
    ("rest_of_system", "rest of the system"), ("wall_idle", "at the wall, idle"), ("wall_load", "at the wall, under load"),
)  # fmt: skip


VALUE_WIDTH = 24


def _value(value: Any, unit: str) -> str:
    """The value as plain text, not yet escaped."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".strip()


def fit(text: str, width: int) -> str:
    """``text`` escaped, cut to ``width`` characters with an ellipsis when longer. It is cut
    between escapes, never inside one, so a control character never reaches the terminal."""
    pieces = [escape_text(char) for char in text]
    if sum(len(piece) for piece in pieces) <= width:
        return "".join(pieces)
    out, used = [], 0
    for piece in pieces:
        if used + len(piece) > width - 1:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + "…"


def _sources(offer: Offer) -> list[str]:
    seen: list[str] = []
    for f in offer.fields:
        for part in f.source.split("; "):
            part = part.split(": ", 1)[1] if part.startswith(("job: ", "units: ")) else part
            if part not in seen:
                seen.append(part)
    return seen


def _power_lines(offer: Offer, markdown: bool) -> list[str]:
    if offer.power is None:
        return []
    data = offer.power.as_dict()
    lines = ["", "## Power while hosting" if markdown else "Power while hosting"]
    if markdown:
        lines += ["", "| figure | watts | provenance | how |", "|---|---|---|---|"]
    for key, title in POWER_ROWS:
        fig = data[key]
        watts = "-" if fig["watts"] is None else f"{fig['watts']:g} W"
        how = escape_text(fig["how"])
        if markdown:
            lines.append(f"| {title} | {watts} | {fig['provenance']} | {how.replace('|', '/')} |")
        else:
            lines.append(f"  {title:24} {watts:>9}  {fig['provenance']:9}  {how}")
    return lines


def _plain(number: float) -> str:
    return f"{number:.2f}".rstrip("0").rstrip(".")


def _self_test_lines(offer: Offer, markdown: bool) -> list[str]:
    if not offer.self_test:
        return []
    title = "Vast's self-test preflight (vast-cli machine_diagnostics.py): would the offer qualify?"
    lines = ["", f"## {title}" if markdown else title]
    if markdown:
        lines += ["", "| field | actual | required | result |", "|---|---|---|---|"]
    for c in offer.self_test:
        actual = "-" if c.actual is None else f"{_plain(c.actual)} {c.unit}"
        need = f"{c.operator} {_plain(c.required)} {c.unit}"
        if markdown:
            lines.append(f"| `{c.field}` | {actual} | {need} | {c.status} |")
        else:
            lines.append(f"  {c.field:20} {actual:>16}  {need:>18}  {c.status}")
    return lines


def render_offer(offer: Offer, fmt: str) -> str:
    if fmt == "json":
        return dumps(offer.as_dict(), indent=2) + "\n"
    markdown = fmt == "markdown"
    if markdown:
        offer = markdown_tree(offer)
    lines: list[str] = []
    if markdown:
        lines += ["# The offer a Vast renter would see", "", "| field | value | label | how |", "|---|---|---|---|"]
    else:
        lines += ["The offer a Vast renter would see (Vast's field names)", ""]
        lines.append(f"  {'field':20} {'value':{VALUE_WIDTH}} {'label':30} how")
    for f in offer.fields:
        value = _value(f.value, f.unit)
        how = escape_text(f.how)
        if markdown:  # the whole value: a Markdown table needs no alignment
            lines.append(f"| `{f.name}` | {escape_text(value).replace('|', '/')} | {f.label} | {how.replace('|', '/')} |")
        else:  # cut to its column, so a long CPU name does not push the rest out of line (JSON has it whole)
            lines.append(f"  {f.name:20} {fit(value, VALUE_WIDTH):{VALUE_WIDTH}} {str(f.label):30} {how}")
    later = [f.name for f in offer.fields if f.label is Label.NOT_BEFORE_LISTING]
    lines += ["", ("Not measurable before listing: " + ", ".join(later) + " (Vast computes or observes them "
                   "once the machine is listed).")]
    lines += _power_lines(offer, markdown)
    lines += _self_test_lines(offer, markdown)
    lines += ["", "## Definitions" if markdown else "Definitions (Vast's own words)"]
    if markdown:
        lines.append("")
    for f in offer.fields:
        lines.append(f"- `{f.name}`: {escape_text(f.definition)}" if markdown else f"  {f.name:20} {escape_text(f.definition)}")
    lines += ["", "## Sources" if markdown else "Sources"]
    if markdown:
        lines.append("")
    lines += [f"- {s}" if markdown else f"  {s}" for s in _sources(offer)]
    lines += ["", *[escape_text(n) for n in offer.notes]]
    return "\n".join(lines) + "\n"
