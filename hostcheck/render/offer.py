"""The offer preview as a terminal table, markdown or JSON (values from facts are escaped)."""

from __future__ import annotations

from typing import Any

from hostcheck.measure.offer import Label, Offer
from hostcheck.render.escape import escape_text
from hostcheck.safeio import dumps

POWER_ROWS = (
    ("gpu_idle", "GPU, idle"), ("gpu_load", "GPU, under load"), ("cpu_package", "CPU package"),
    ("rest_of_system", "rest of the system"), ("wall_idle", "at the wall, idle"), ("wall_load", "at the wall, under load"),
)  # fmt: skip


def _value(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return escape_text(f"{text} {unit}".strip())


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
    lines: list[str] = []
    if markdown:
        lines += ["# The offer a Vast renter would see", "", "| field | value | label | how |", "|---|---|---|---|"]
    else:
        lines += ["The offer a Vast renter would see (Vast's field names)", ""]
        lines.append(f"  {'field':20} {'value':24} {'label':30} how")
    for f in offer.fields:
        value = _value(f.value, f.unit)
        how = escape_text(f.how)
        if markdown:
            lines.append(f"| `{f.name}` | {value.replace('|', '/')} | {f.label} | {how.replace('|', '/')} |")
        else:
            lines.append(f"  {f.name:20} {value:24} {str(f.label):30} {how}")
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
