"""The money: pure functions of the owner's inputs, the machine's power and a platform's fee.

The formula (research notes, economics §7; H hours per month, N GPUs, U occupancy, P price per
GPU-hour, φ fee share, E electricity price per kWh, B the watts the machine would draw anyway):

    R   = N·P·U·H·(1−φ) + S                                  revenue, S other income (storage, bandwidth)
    K   = H·[U·max(W_load−B, 0) + (1−U)·max(W_idle−B, 0)]/1000   extra kWh from hosting
    C_e = K·E                                                 electricity
    D   = V·U·H / (L·8760)                                    depreciation, V value, L life in years
                                                              of round-the-clock use [inference]
    Net₀ = (R − C_e − D)·(1 − t)                              t tax share [inference: treatment varies]
    heating month:  + K·f·c_heat    c_heat = E (resistive), E/SPF (heat pump), P_fuel/η (boiler)
    cooling month:  − K·g·E/COP_c
    otherwise:        Net₀

Two deviations from §7, both labelled where they are shown: the extra draw per state is never
below zero (a baseline above the idle draw does not turn idling into income), and with a
day/night tariff E is the hour-weighted mean price, which assumes rentals are spread evenly
over the day [inference]. Everything is linear in U and in P, which the break-even figures use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

HOURS_PER_YEAR = 8760
HEATING_KINDS = ("none", "resistive", "heat-pump", "gas", "oil")
SEASONS = ("winter", "summer", "other")


@dataclass(frozen=True)
class Tariff:
    """Electricity price per kWh by hour of day: (start hour, end hour, price) periods covering 24 h."""

    periods: tuple[tuple[int, int, float], ...]

    @staticmethod
    def flat(price: float) -> Tariff:
        return Tariff(((0, 24, price),))

    @staticmethod
    def hours(start: int, end: int) -> int:
        return (end - start) % 24 or 24

    @property
    def mean(self) -> float:
        """The hour-weighted mean price (rentals spread evenly over the day [inference])."""
        return sum(self.hours(a, b) * price for a, b, price in self.periods) / 24

    @property
    def peak(self) -> float:
        return max(price for _, _, price in self.periods)


@dataclass(frozen=True)
class Heating:
    kind: str = "none"
    months: frozenset[int] = frozenset()
    share: float = 0.7  # f: share of the extra heat that displaces heating
    spf: float = 2.8
    boiler_efficiency: float = 0.84
    fuel_price: float | None = None  # per kWh of gas or oil

    def cost_per_kwh_heat(self, electricity: float) -> float:
        """What one kWh of heat would have cost the owner's own heating."""
        if self.kind == "resistive":
            return electricity
        if self.kind == "heat-pump":
            return electricity / self.spf
        if self.kind in ("gas", "oil"):
            assert self.fuel_price is not None
            return self.fuel_price / self.boiler_efficiency
        return 0.0


@dataclass(frozen=True)
class Cooling:
    months: frozenset[int] = frozenset()
    cop: float = 3.9
    share: float = 1.0  # g: share of the heat that lands in the cooled space


@dataclass(frozen=True)
class Owner:
    """What the owner gives: prices, occupancy, heating, hardware."""

    tariff: Tariff
    occupancy: float  # U, 0-1
    price: float | None = None  # P per GPU-hour
    heating: Heating = field(default_factory=Heating)
    cooling: Cooling = field(default_factory=Cooling)
    hardware_value: float = 0.0
    life_years: float = 4.0
    baseline_w: float = 0.0
    tax: float = 0.0
    other_income: float = 0.0
    hours_per_month: float = 730.0


@dataclass(frozen=True)
class Power:
    """Wall watts of the whole machine while listed-but-idle and while rented (under load)."""

    idle_w: float
    load_w: float
    gpus: int


@dataclass(frozen=True)
class Month:
    """One month's money in one season at one occupancy, price and fee."""

    revenue: float
    extra_kwh: float
    electricity: float
    depreciation: float
    net_before_heat: float
    heat_credit: float
    cooling_penalty: float

    @property
    def net(self) -> float:
        return self.net_before_heat + self.heat_credit - self.cooling_penalty


def season_of(month: int, owner: Owner) -> str:
    if owner.heating.kind != "none" and month in owner.heating.months:
        return "winter"
    if month in owner.cooling.months:
        return "summer"
    return "other"


def month_counts(owner: Owner) -> dict[str, int]:
    counts = dict.fromkeys(SEASONS, 0)
    for month in range(1, 13):
        counts[season_of(month, owner)] += 1
    return counts


def month(owner: Owner, power: Power, *, fee: float, season: str, occupancy: float | None = None,
          price: float | None = None) -> Month:
    """The money of one month. ``fee`` is a share 0-1; ``occupancy``/``price`` override the owner's."""
    u = owner.occupancy if occupancy is None else occupancy
    p = (owner.price or 0.0) if price is None else price
    h = owner.hours_per_month
    e = owner.tariff.mean
    revenue = power.gpus * p * u * h * (1 - fee) + owner.other_income
    extra_kwh = h * (u * max(power.load_w - owner.baseline_w, 0.0)
                     + (1 - u) * max(power.idle_w - owner.baseline_w, 0.0)) / 1000
    electricity = extra_kwh * e
    depreciation = owner.hardware_value * u * h / (owner.life_years * HOURS_PER_YEAR) if owner.hardware_value else 0.0
    net0 = (revenue - electricity - depreciation) * (1 - owner.tax)
    credit = penalty = 0.0
    if season == "winter":
        credit = extra_kwh * owner.heating.share * owner.heating.cost_per_kwh_heat(e)
    elif season == "summer":
        penalty = extra_kwh * owner.cooling.share * e / owner.cooling.cop
    return Month(revenue, extra_kwh, electricity, depreciation, net0, credit, penalty)


def net(owner: Owner, power: Power, *, fee: float, season: str, occupancy: float | None = None,
        price: float | None = None) -> float:
    """Net per month in ``season``, or averaged over the twelve months for ``season='year'``."""
    if season != "year":
        return month(owner, power, fee=fee, season=season, occupancy=occupancy, price=price).net
    total = sum(month(owner, power, fee=fee, season=season_of(m, owner), occupancy=occupancy, price=price).net
                for m in range(1, 13))
    return total / 12


def break_even_price(owner: Owner, power: Power, *, fee: float, season: str,
                     occupancy: float | None = None) -> float | None:
    """The price per GPU-hour at which ``season``'s net is zero; None when no price can do it
    (no rented hours, or the fee takes everything). Net is linear in the price."""
    u = owner.occupancy if occupancy is None else occupancy
    # Net's slope in the price, the same in every season (heat and wear do not depend on the
    # price); written out rather than taken as net(1) - net(0), which loses the digits of a
    # tiny slope to the size of the costs.
    slope = power.gpus * u * owner.hours_per_month * (1 - fee) * (1 - owner.tax)
    if slope <= 1e-9:  # no rented hours to speak of: no price can pay for the idle draw
        return None
    # Zero when even a free GPU-hour does not lose money (other income, a high baseline).
    return max(0.0, -net(owner, power, fee=fee, season=season, occupancy=u, price=0.0) / slope)


def break_even_occupancy(owner: Owner, power: Power, *, fee: float, season: str,
                         price: float | None = None) -> float | None:
    """The occupancy (0-1) at which ``season``'s net reaches zero at ``price``: 0 when it is
    never negative, None when even full occupancy does not pay. Net is linear in occupancy."""
    at0 = net(owner, power, fee=fee, season=season, occupancy=0.0, price=price)
    at1 = net(owner, power, fee=fee, season=season, occupancy=1.0, price=price)
    if at0 >= 0:
        return 0.0
    if at1 < 0 or at1 <= at0:
        return None
    return -at0 / (at1 - at0)


def min_bid_floor(owner: Owner, power: Power) -> float:
    """Vast's guidance: the interruptible minimum bid should cover the power cost under load;
    per GPU-hour, at the dearest hour of the tariff."""
    return power.load_w / power.gpus / 1000 * owner.tariff.peak


def grid(values: Iterable[float]) -> list[float]:
    return [round(v, 6) for v in values]
