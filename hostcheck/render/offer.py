"""The offer preview as terminal text or Markdown (values from facts are escaped)."""

from __future__ import annotations

from typing import Any

from hostcheck.measure.offer import Label, Offer
from hostcheck.models import Status
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


def _summary(offer: Offer, width: int) -> list[str]:
    """The answer: would Vast's self-test pass the offer, the values measured here, what is not
    measured yet and what only Vast can say, the power at the wall; each field's label, how it
    was read, Vast's definition and the sources are for --details."""
    lines: list[str] = []
    if offer.self_test:
        by: dict[str, list[str]] = {}
        for c in offer.self_test:
            by.setdefault(c.status, []).append(c.field)
        verdict = "fails" if by.get(Status.FAIL) else "cannot be told yet" if by.get(Status.UNKNOWN) else "passes"
        said = "; ".join(f"{status}: {', '.join(names)}" for status, names in
                         ((s, by[s]) for s in (Status.FAIL, Status.UNKNOWN, Status.PASS) if s in by))
        lines += wrap(f"Vast's self-test preflight {verdict} on this offer ({said}).", width)
    known = [f for f in offer.fields if f.value is not None]
    lines += ["", *wrap("What a Vast renter would see, read here before listing: " + "; ".join(
        f"{f.name} {escape_text(_value(f.value, f.unit))}" for f in known) + ".", width)]
    missing = [f.name for f in offer.fields if f.value is None and f.label is not Label.NOT_BEFORE_LISTING]
    if missing:
        lines += wrap(f"Not measured here: {', '.join(missing)} (how to measure each: --details).", width)
    later = [f.name for f in offer.fields if f.label is Label.NOT_BEFORE_LISTING]
    if later:
        lines += wrap(f"Only Vast can say, once the machine is listed: {', '.join(later)}.", width)
    if offer.power is not None:
        data = offer.power.as_dict()
        idle, load = data["wall_idle"], data["wall_load"]

        def watts(fig: dict[str, Any]) -> str:
            return "unknown" if fig["watts"] is None else f"{fig['watts']:g} W ({fig['provenance']})"

        lines += ["", *wrap(f"Power at the wall: {watts(idle)} idle, {watts(load)} under load.", width)]
    lines += ["", *wrap("Each field's label and how it was read, Vast's definitions, the power's derivation and the "
                        "sources: add --details.", width)]
    return lines


def offer_text(offer: Offer, markdown: bool = False, details: bool = False) -> str:
    """The offer as terminal text (without ``details``, the answer alone: :func:`_summary`), or
    as Markdown (the formats call this; JSON is the offer's own dict)."""
    width = terminal_width()
    if not markdown and not details:
        return "\n".join(_summary(offer, width)) + "\n"
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
            lines += wrap(f"{f.name}: {value} ({said})", width, first="  ", indent="      ", whole_urls=True)
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
        lines += [f"- {source}"] if markdown else wrap(source, width, first="  ", indent="      ", whole_urls=True)
    notes = list(dict.fromkeys(escape_text(n) for n in offer.notes))  # one reason said once
    lines += ["", *(notes if markdown else [line for n in notes for line in wrap(n, width)])]
    return "\n".join(lines) + "\n"
