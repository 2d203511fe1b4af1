"""The offer preview as terminal text or Markdown (values from facts are escaped)."""

from __future__ import annotations

from typing import Any

from hostcheck.measure.offer import Label, Offer
from hostcheck.render.columns import columns
from hostcheck.render.escape import escape_text
from hostcheck.render.markdown_escape import markdown_tree
from hostcheck.render.terminal import terminal_width, wrap
from hostcheck.wording import plain as _plain

POWER_ROWS = (
    ("gpu_idle", "GPU, idle"), ("gpu_load", "GPU, under load"), ("cpu_package", "CPU package"),
    ("rest_of_system", "rest of the system"), ("wall_idle", "at the wall, idle"), ("wall_load", "at the wall, under load"),
)  # fmt: skip


def _value(value: Any, unit: str) -> str:
    """The value as plain text, not yet escaped."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".strip()


def _entry(text: str, width: int) -> list[str]:
    """One entry of a list, wrapped to the terminal, its continuation lines indented under it."""
    return wrap(text, width, first="  ", indent="      ")


def _sources(offer: Offer) -> list[str]:
    seen: list[str] = []
    for f in offer.fields:
        for part in f.source.split("; "):
            part = part.split(": ", 1)[1] if part.startswith(("job: ", "units: ")) else part
            if part not in seen:
                seen.append(part)
    return seen


def _power_lines(offer: Offer, markdown: bool, width: int) -> list[str]:
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
            said = how if how.startswith(fig["provenance"]) else f"{fig['provenance']}: {how}"
            lines += _entry(f"{title}: {watts}, {said}", width)
    return lines


def _self_test_lines(offer: Offer, markdown: bool, width: int) -> list[str]:
    if not offer.self_test:
        return []
    title = "Vast's self-test preflight (vast-cli machine_diagnostics.py): would the offer qualify?"
    lines = ["", f"## {title}"] if markdown else ["", *wrap(title, width)]
    if markdown:
        lines += ["", "| field | actual | required | result |", "|---|---|---|---|"]
    rows = []
    for c in offer.self_test:
        actual = "-" if c.actual is None else f"{_plain(c.actual)} {c.unit}"
        need = f"{c.operator} {_plain(c.required)} {c.unit}"
        if markdown:
            lines.append(f"| `{c.field}` | {actual} | {need} | {c.status} |")
        rows.append((c.field, actual, need, c.status))
    if not markdown:
        lines += ["  " + line for line in columns(("field", "actual", "required", "result"), rows, width - 2, right=(1, 2))]
    return lines


def offer_text(offer: Offer, markdown: bool = False) -> str:
    """The offer as terminal text, or as Markdown (the formats call this; JSON is the offer's own dict)."""
    width = terminal_width()
    if markdown:
        offer = markdown_tree(offer)
    lines: list[str] = []
    if markdown:
        lines += ["# The offer a Vast renter would see", "", "| field | value | label | how |", "|---|---|---|---|"]
    else:
        lines += [*wrap("The offer a Vast renter would see (Vast's field names: value, label, how)", width), ""]
    for f in offer.fields:
        value = escape_text(_value(f.value, f.unit))
        how = escape_text(f.how)
        if markdown:
            lines.append(f"| `{f.name}` | {value.replace('|', '/')} | {f.label} | {how.replace('|', '/')} |")
        else:  # the whole value, wrapped (JSON has it as it is)
            said = how if how.startswith(str(f.label)) else f"{f.label}: {how}"
            lines += _entry(f"{f.name}: {value} ({said})", width)
    later = [f.name for f in offer.fields if f.label is Label.NOT_BEFORE_LISTING]
    note = ("Not measurable before listing: " + ", ".join(later) + " (Vast computes or observes them once the "
            "machine is listed).")
    lines += ["", note] if markdown else ["", *wrap(note, width)]
    lines += _power_lines(offer, markdown, width)
    lines += _self_test_lines(offer, markdown, width)
    lines += ["", "## Definitions" if markdown else "Definitions (Vast's own words)"]
    if markdown:
        lines.append("")
    for f in offer.fields:
        text = f"{f.name}: {escape_text(f.definition)}"
        lines += [f"- `{f.name}`: {escape_text(f.definition)}"] if markdown else _entry(text, width)
    lines += ["", "## Sources" if markdown else "Sources"]
    if markdown:
        lines.append("")
    for source in _sources(offer):
        lines += [f"- {source}"] if markdown else _entry(source, width)
    notes = [escape_text(n) for n in offer.notes]
    lines += ["", *(notes if markdown else [line for n in notes for line in wrap(n, width)])]
    return "\n".join(lines) + "\n"
