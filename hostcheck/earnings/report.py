"""The earnings report's data classes: one JSON-ready document per run (schema
``hostcheck/schema/earnings-v1.json``, generated from EarningsReport), and the words its fields
take. ``hostcheck.earnings.build`` fills it in; the renderers read it back as a dict.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hostcheck.models import FEASIBLE

EARNINGS_VERSION: Literal[1] = 1
ACCEPTS = ("NVIDIA on Linux", "NVIDIA on Windows", "Apple Silicon", "closed to new hosts")
"""What a platform takes (PlatformOut.accepts), in the order earnings lists the platforms without an audit."""
CLOSED = ACCEPTS[3]
NOT_PUBLISHED = "not published"
"""A payout term the platform does not publish (Payout's fields)."""


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
    market: dict[str, Any] | None = Field(default=None, description="with --market: the market snapshot's summary "
                                          "(hostcheck market --format json); null: not read")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


def audit_feasible(verdict: str | None) -> bool | None:
    """Whether the audit finds the platform feasible ("policy: verdict", as in PlatformOut);
    None when there was no audit to ask."""
    if verdict is None:
        return None
    return verdict.rsplit(": ", 1)[-1] in FEASIBLE
