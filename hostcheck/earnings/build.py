"""The earnings report built from checked owner inputs, the machine's power figures (each
measured, estimated, given or unknown, and how), the platforms' data files and, when facts are
known, the audit's headline and verdicts: earnings never override an owner-risk warning, so the
audit's headline leads.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from hostcheck import __version__
from hostcheck.earnings import model as m
from hostcheck.earnings.data import ConstantsDocument, PlatformDocument
from hostcheck.earnings.headline import earnings_headline
from hostcheck.earnings.inputs import Given
from hostcheck.earnings.report import (
    ACCEPTS,
    CLOSED,
    EARNINGS_VERSION,
    NOT_PUBLISHED,
    CaveatOut,
    Chart,
    ConstantOut,
    EarningsReport,
    FeeOut,
    Inputs,
    Machine,
    MinBidCheck,
    MonthParts,
    Payout,
    PlatformOut,
    PowerOut,
    SeasonFigures,
    Sensitivity,
    SourceOut,
    Span,
)

OCCUPANCY_STEPS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)
PRICE_FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5)
CHART_STEPS = tuple(i / 10 for i in range(11))


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
    minimum = NOT_PUBLISHED if isinstance(p.minimum, str) else f"{p.minimum.amount:g} {p.minimum.currency}"
    def said(text: str) -> str:
        return NOT_PUBLISHED if text == "not-published" else text
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
