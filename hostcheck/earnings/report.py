"""The earnings report: one JSON-ready document per run (schema ``hostcheck/schema/earnings-v1.json``).

Built from checked owner inputs, the machine's power figures (each measured, estimated, given
or unknown, and how), the platforms' data files and, when facts are known, the audit's headline
and verdicts: earnings never override an owner-risk warning, so the audit's headline leads.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hostcheck import __version__
from hostcheck.earnings import model as m
from hostcheck.earnings.data import ConstantsDocument, PlatformDocument
from hostcheck.earnings.inputs import Given
from hostcheck.models import FEASIBLE

EARNINGS_VERSION: Literal[1] = 1
OCCUPANCY_STEPS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)
PRICE_FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5)
CHART_STEPS = tuple(i / 10 for i in range(11))


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceOut(_Out):
    title: str
    url: str
    checked: str


class PowerOut(_Out):
    watts: float | None
    provenance: Literal["measured", "estimated", "given", "unknown"]
    how: str


class Span(_Out):
    """A figure over the range of what is not known (the fee, where not published; the idle
    draw, where unknown): ``worst`` and ``best``, equal when nothing is uncertain."""

    worst: float | None
    best: float | None


class SeasonFigures(_Out):
    months: int
    net_per_month: Span
    break_even_price: Span = Field(description="per GPU-hour at the given occupancy; null: no price breaks even")
    break_even_occupancy_pct: Span = Field(description="at the given price; null: not even at 100 %")


class MonthParts(_Out):
    revenue: float
    extra_kwh: float
    electricity: float
    depreciation: float
    heat_credit: float
    cooling_penalty: float
    net: float


class Sensitivity(_Out):
    fee_pct: float
    season: Literal["year"]
    occupancy_pct: list[float]
    price_per_gpu_hour: list[float]
    net_per_month: list[list[float]] = Field(description="rows: occupancy; columns: price")


class Chart(_Out):
    fee_pct: float
    occupancy_pct: list[float]
    winter: list[float] | None
    summer: list[float] | None
    year: list[float]


class MinBidCheck(_Out):
    floor_per_gpu_hour: float = Field(description="power cost under load per GPU-hour at the dearest tariff hour")
    min_bid: float | None
    covers: bool | None
    note: str
    source: SourceOut


class CaveatOut(_Out):
    text: str
    source: SourceOut


class Payout(_Out):
    minimum: str
    form: str
    currency: str
    schedule: str
    expiry: str
    caveats: list[CaveatOut]
    source: SourceOut


class FeeOut(_Out):
    status: Literal["published", "not-published", "conflicting", "given", "net-rate"] = Field(
        description="net-rate: the platform shows hosts the rate they earn, so no fee is taken from it (0 %)")
    low_pct: float
    high_pct: float
    why: str
    source: SourceOut | None


class PlatformOut(_Out):
    platform: str
    title: str
    accepts: list[str] = Field(description="what the platform takes, from its audit policies: NVIDIA on Linux, "
                                           "NVIDIA on Windows, Apple Silicon, or closed to new hosts")
    priced: bool = Field(description="false: closed to new hosts and not asked for by name, so no figures")
    audit_verdict: str | None = Field(description="the audit's verdict for this platform; null without facts")
    price_per_gpu_hour: float | None
    price_from: str
    price_set_by: Literal["host", "platform"] = Field(description="who sets the rate (platform: give the rate it shows you)")
    rate: Literal["before-fee", "net-of-fee"] = Field(description="whether the platform's fee is taken from the price "
                                                                   "(before-fee) or already out of it (net-of-fee)")
    pricing_note: str
    fee: FeeOut
    at_given: MonthParts | None = Field(description="one whole-year-average month, worst case, at the given price")
    seasons: dict[str, SeasonFigures] | None
    year_total: Span | None
    sensitivity: Sensitivity | None
    chart: Chart | None
    min_bid: MinBidCheck | None
    payout: Payout


class ConstantOut(_Out):
    name: str
    value: float | str
    unit: str
    used_default: bool
    option: str | None
    inference: bool
    note: str
    source: SourceOut


class Period(_Out):
    from_hour: int = Field(ge=0, le=23)
    to_hour: int = Field(ge=0, le=24)
    price_per_kwh: float


class Electricity(_Out):
    periods: list[Period]
    mean_per_kwh: float = Field(description="hour-weighted mean (rentals assumed spread over the day)")
    peak_per_kwh: float


class HeatingIn(_Out):
    kind: Literal["none", "resistive", "heat-pump", "gas", "oil"]
    months: list[int]
    share_pct: float
    spf: float
    boiler_efficiency_pct: float
    fuel_price_per_kwh: float | None


class CoolingIn(_Out):
    months: list[int]
    cop: float
    share_pct: float


class Inputs(_Out):
    electricity: Electricity
    price_per_gpu_hour: float | None
    platform_price: dict[str, float]
    occupancy_pct: float = Field(ge=0, le=100)
    fee_pct: float | None = Field(description="the fee the owner gave (replaces the data files'); null: not given")
    heating: HeatingIn
    cooling: CoolingIn
    hardware_value: float
    remaining_life_years: float | None
    baseline_w: float
    tax_pct: float
    other_income_per_month: float
    min_bid: float | None
    config_file: str | None


class Machine(_Out):
    from_: str = Field(alias="from", description="facts file, this machine, or flags")
    gpus: int
    gpu_name: str | None
    audit_headline: str | None
    owner_risk: str | None


class EarningsReport(_Out):
    model_config = ConfigDict(title="hostcheck earnings report, version 1", populate_by_name=True)

    earnings_version: Literal[1]
    tool: dict[str, str]
    generated_at: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    headline: str
    currency: str
    machine: Machine
    inputs: Inputs
    power: dict[str, PowerOut]
    power_known: bool
    constants: list[ConstantOut]
    platforms: list[PlatformOut]
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


def _src(doc: Any, key: str) -> SourceOut:
    s = doc.sources[key]
    return SourceOut(title=s.title, url=s.url, checked=s.checked.isoformat())


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def _span(worst: float | None, best: float | None, digits: int = 4) -> Span:
    return Span(worst=_r(worst, digits), best=_r(best, digits))


def _months(ms: frozenset[int]) -> list[int]:
    return sorted(ms)


def constants_out(constants: ConstantsDocument, given: Given) -> list[ConstantOut]:
    heating = given.owner.heating.kind
    relevant = {"hours_per_month"}
    if heating != "none":
        relevant |= {"heat_share_pct", "heating_months"}
    if heating == "heat-pump":
        relevant.add("heat_pump_spf")
    if heating in ("gas", "oil"):
        relevant.add("boiler_efficiency_pct")
    if given.owner.cooling.months:
        relevant |= {"cooling_cop", "cooling_share_pct"}
    out = []
    for name, c in constants.constants.items():
        if name not in relevant:
            continue
        out.append(ConstantOut(name=name, value=c.value, unit=c.unit, option=c.option, inference=c.inference,
                               used_default=name in given.defaults_used or name == "hours_per_month",
                               note=c.note, source=_src(constants, c.source)))
    return out


def inputs_out(given: Given) -> Inputs:
    o = given.owner
    return Inputs.model_validate({
        "electricity": {
            "periods": [{"from_hour": a, "to_hour": b, "price_per_kwh": p} for a, b, p in o.tariff.periods],
            "mean_per_kwh": round(o.tariff.mean, 6), "peak_per_kwh": o.tariff.peak,
        },
        "price_per_gpu_hour": o.price,
        "platform_price": given.platform_price,
        "occupancy_pct": round(o.occupancy * 100, 6),
        "fee_pct": None if given.fee is None else round(given.fee * 100, 6),
        "heating": {"kind": o.heating.kind, "months": _months(o.heating.months),
                    "share_pct": round(o.heating.share * 100, 6), "spf": o.heating.spf,
                    "boiler_efficiency_pct": round(o.heating.boiler_efficiency * 100, 6),
                    "fuel_price_per_kwh": o.heating.fuel_price},
        "cooling": {"months": _months(o.cooling.months), "cop": o.cooling.cop,
                    "share_pct": round(o.cooling.share * 100, 6)},
        "hardware_value": o.hardware_value, "remaining_life_years": o.life_years if o.hardware_value else None,
        "baseline_w": o.baseline_w, "tax_pct": round(o.tax * 100, 6), "other_income_per_month": o.other_income,
        "min_bid": given.min_bid, "config_file": str(given.config) if given.config else None,
    })


def _fee(doc: PlatformDocument, given: Given) -> FeeOut:
    if given.fee is not None:
        pct = given.fee * 100
        return FeeOut(status="given", low_pct=pct, high_pct=pct, why="the fee you gave (--fee)", source=None)
    if doc.pricing.rate == "net-of-fee":
        # The rate entered is the one the platform shows hosts, already net of its share: taking
        # the fee range from it again would count the fee twice.
        return FeeOut(status="net-rate", low_pct=0.0, high_pct=0.0,
                      why=f"{doc.title} shows hosts the rate they earn: give that rate as --price and no fee is taken "
                          "from it again (--fee PCT applies one, for a rate that is not net)",
                      source=_src(doc, doc.pricing.source))
    low, high = doc.fee.bounds
    return FeeOut(status=doc.fee.status, low_pct=low, high_pct=high, why=doc.fee.why, source=_src(doc, doc.fee.source))


def _payout(doc: PlatformDocument) -> Payout:
    p = doc.payout
    minimum = "not published" if isinstance(p.minimum, str) else f"{p.minimum.amount:g} {p.minimum.currency}"
    def said(text: str) -> str:
        return "not published" if text == "not-published" else text
    return Payout(minimum=minimum, form=said(p.form), currency=said(p.currency), schedule=said(p.schedule),
                  expiry=said(p.expiry), caveats=[CaveatOut(text=c.text, source=_src(doc, c.source)) for c in p.caveats],
                  source=_src(doc, p.source))


def platform_out(doc: PlatformDocument, given: Given, powers: tuple[m.Power, m.Power] | None,
                 verdict: str | None, accepts: list[str], priced: bool = True) -> PlatformOut:
    """``powers``: (worst, best) machine power, or None when the draw under load is unknown;
    ``priced`` False: no figures at all (a platform closed to new hosts)."""
    if not priced:
        powers = None
    fee = _fee(doc, given)
    fee_hi, fee_lo = fee.high_pct / 100, fee.low_pct / 100
    price = given.platform_price.get(doc.platform, given.owner.price)
    price_from = ("--platform-price" if doc.platform in given.platform_price
                  else "--price" if given.owner.price is not None else "not given")
    owner = dataclasses.replace(given.owner, price=price)
    seasons = at_given = year_total = sensitivity = chart = min_bid = None
    if powers is not None:
        worst_p, best_p = powers
        counts = m.month_counts(owner)
        seasons = {}
        for season in ("winter", "summer", "other", "year"):
            n = 12 if season == "year" else counts[season]
            if season != "year" and (n == 0 or n == 12):
                continue  # a season of all twelve months is the year
            def fig(fee_share: float, power: m.Power, what: str, s: str = season) -> float | None:
                if what == "net":
                    return m.net(owner, power, fee=fee_share, season=s) if price is not None else None
                if what == "price":
                    return m.break_even_price(owner, power, fee=fee_share, season=s)
                if price is None:
                    return None
                u = m.break_even_occupancy(owner, power, fee=fee_share, season=s)
                return None if u is None else u * 100
            seasons[season] = SeasonFigures(
                months=n,
                net_per_month=_span(fig(fee_hi, worst_p, "net"), fig(fee_lo, best_p, "net"), 2),
                break_even_price=_span(fig(fee_hi, worst_p, "price"), fig(fee_lo, best_p, "price")),
                break_even_occupancy_pct=_span(fig(fee_hi, worst_p, "occ"), fig(fee_lo, best_p, "occ"), 1),
            )
        if price is not None:
            parts = [m.month(owner, worst_p, fee=fee_hi, season=m.season_of(k, owner)) for k in range(1, 13)]
            at_given = MonthParts(**{name: round(sum(getattr(p, name) for p in parts) / 12, 2) for name in
                                     ("revenue", "extra_kwh", "electricity", "depreciation", "heat_credit",
                                      "cooling_penalty")}, net=round(sum(p.net for p in parts) / 12, 2))
            year_total = _span(m.net(owner, worst_p, fee=fee_hi, season="year") * 12,
                               m.net(owner, best_p, fee=fee_lo, season="year") * 12, 2)
        base_price = price if price is not None else m.break_even_price(owner, worst_p, fee=fee_hi, season="year",
                                                                       occupancy=0.5)
        if base_price is not None and base_price > 0:
            prices = [round(base_price * f, 4) for f in PRICE_FACTORS]
            sensitivity = Sensitivity(
                fee_pct=fee.high_pct, season="year", occupancy_pct=[u * 100 for u in OCCUPANCY_STEPS],
                price_per_gpu_hour=prices,
                net_per_month=[[round(m.net(owner, worst_p, fee=fee_hi, season="year", occupancy=u, price=p), 2)
                                for p in prices] for u in OCCUPANCY_STEPS],
            )
        if price is not None:
            def line(season: str) -> list[float]:
                return [round(m.net(owner, worst_p, fee=fee_hi, season=season, occupancy=u), 2) for u in CHART_STEPS]
            chart = Chart(fee_pct=fee.high_pct, occupancy_pct=[round(u * 100, 1) for u in CHART_STEPS],
                          winter=line("winter") if counts["winter"] else None,
                          summer=line("summer") if counts["summer"] else None, year=line("year"))
        if doc.min_bid is not None:
            floor = m.min_bid_floor(owner, worst_p)
            bid = given.min_bid
            min_bid = MinBidCheck(
                floor_per_gpu_hour=round(floor, 4), min_bid=bid, covers=None if bid is None else bid >= floor,
                note=doc.min_bid.note, source=_src(doc, doc.min_bid.source))
    return PlatformOut(platform=doc.platform, title=doc.title, accepts=accepts, priced=priced,
                       audit_verdict=verdict, price_per_gpu_hour=price,
                       price_from=price_from, price_set_by=doc.pricing.set_by, rate=doc.pricing.rate, pricing_note=doc.pricing.note, fee=fee, at_given=at_given, seasons=seasons, year_total=year_total,
                       sensitivity=sensitivity, chart=chart, min_bid=min_bid, payout=_payout(doc))


ACCEPTS = ("NVIDIA on Linux", "NVIDIA on Windows", "Apple Silicon", "closed to new hosts")
"""What a platform takes, in the order earnings lists the platforms without an audit."""
CLOSED = ACCEPTS[3]


def build_earnings(*, given: Given, constants: ConstantsDocument,
                   platforms: list[tuple[PlatformDocument, str | None, list[str]]],
                   power: dict[str, PowerOut], powers: tuple[m.Power, m.Power] | None, machine: Machine,
                   notes: list[str], price_closed: bool = False) -> dict[str, Any]:
    """``price_closed``: the owner named the platforms, so one closed to new hosts is priced too
    (for a host already on it)."""
    outs = [platform_out(doc, given, powers, verdict, what, priced=price_closed or CLOSED not in what)
            for doc, verdict, what in platforms]
    if not machine.audit_headline:
        order = {a: i for i, a in enumerate(ACCEPTS)}
        outs.sort(key=lambda p: min(order[a] for a in p.accepts))  # stable: by name within a group
    headline = earnings_headline(machine, outs, powers is not None, given.currency)
    report = EarningsReport(
        earnings_version=EARNINGS_VERSION, tool={"name": "hostcheck", "version": __version__},
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"), headline=headline, currency=given.currency,
        machine=machine, inputs=inputs_out(given), power=power, power_known=powers is not None,
        constants=constants_out(constants, given), platforms=outs, notes=notes,
    )
    return report.as_dict()


def money(x: float | None, currency: str, digits: int = 2) -> str:
    if x is None:
        return "n/a"
    sign = "-" if x < 0 else ""
    return f"{sign}{abs(x):,.{digits}f} {currency}"


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


def audit_feasible(verdict: str | None) -> bool | None:
    """Whether the audit finds the platform feasible ("policy: verdict", as in PlatformOut);
    None when there was no audit to ask."""
    if verdict is None:
        return None
    return verdict.rsplit(": ", 1)[-1] in FEASIBLE


def earnings_headline(machine: Machine, platforms: list[PlatformOut], power_known: bool, currency: str) -> str:
    """The audit's headline leads (earnings never override an owner-risk warning); then one
    sentence on money, quoting only a platform the audit finds feasible. Without an audit no
    platform is singled out: the best of each group of machines the platforms take is quoted."""
    lead = machine.audit_headline or ("Not audited (no facts): whether a platform takes this machine was not judged, "
                                      "so the platforms are grouped by the machines they take.")
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
