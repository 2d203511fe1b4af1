"""The earnings headline, the report's one sentence on money, and how it writes money and
ranges: the renderers write every figure the same way, so the headline and the lines under it
agree. Here, not in the rendering layer, because the headline is part of the JSON report.
"""

from __future__ import annotations

from typing import Any

from hostcheck.earnings.report import ACCEPTS, Machine, PlatformOut, Span, audit_feasible
from hostcheck.wording import money

__all__ = ["earnings_headline", "money", "span_text"]


def span_text(span: Span | dict[str, Any] | None, currency: str, digits: int = 2, unit: str = "",
              none: str = "none") -> str:
    if span is None:
        return "n/a"
    s = span if isinstance(span, dict) else span.model_dump()
    worst, best = s["worst"], s["best"]
    def one(x: float | None) -> str:
        if x is None:
            return none
        return f"{x:.{digits}f}{unit}" if unit else money(x, currency, digits)
    if worst == best or (worst is not None and best is not None and abs(worst - best) < 10 ** -digits):
        return one(worst)
    return f"{one(worst)} to {one(best)}"


def earnings_headline(machine: Machine, platforms: list[PlatformOut], power_known: bool, currency: str) -> str:
    """The audit's headline leads (earnings never override an owner-risk warning); then one
    sentence on money, quoting only a platform the audit finds feasible. Without an audit no
    platform is singled out: the best of each group of machines the platforms take is quoted."""
    lead = machine.audit_headline or ("Not audited (no facts): whether a platform takes this machine was not judged, "
                                      "so the platforms are grouped by the machines they take.")
    if machine.gpus == 0:
        how = "give --gpus N and --wall-load-w (a smart-plug reading)" if not power_known else "give --gpus N"
        return f"{lead} No money figure: the audit counts no working NVIDIA GPU here to rent by the GPU-hour ({how} " \
               "to price a machine with N)."
    if not power_known:
        return f"{lead} Earnings unknown: the machine's draw under load is unknown; give --wall-load-w (a smart-plug reading)."
    eligible = [p for p in platforms if audit_feasible(p.audit_verdict) is not False and p.priced]
    if platforms and not eligible and machine.audit_headline:
        return (f"{lead} Money: no platform shown is feasible for this machine as it is, so none is quoted here; "
                "the figures below are what each would earn once it accepts the machine.")
    best = [(p.seasons["year"].net_per_month, p) for p in eligible if p.seasons and p.price_per_gpu_hour is not None]
    if not best:
        return f"{lead} Break-even prices are listed per platform (no --price given)."

    def top(items: list[tuple[Span, PlatformOut]]) -> str:
        span, p = max(items, key=lambda item: item[0].best if item[0].best is not None else float("-inf"))
        return f"{p.title} nets {span_text(span, currency)} a month"

    if machine.audit_headline:
        return f"{lead} Money: {top(best)} over the year at the given price."
    groups = [f"{group}: {top(items)}" for group in ACCEPTS[:3]
              if (items := [(s, p) for s, p in best if group in p.accepts])]
    return f"{lead} Best per group over the year at the given price: {'; '.join(groups)}."
