"""Vast's answers, read tolerantly but within bounds.

Shapes, as the stored copies of Vast's own sources give them (no real answer could be fetched
where this was written):
- the offer search, ``POST /api/v0/bundles/``: ``{"offers": [{...}, ...]}``; per offer
  ``dph_total`` (the renter's total $/hour for the whole offer), ``num_gpus``, ``gpu_name``,
  ``rentable``, ``rented``, ``reliability`` (0-1), ``verification`` ("verified", "unverified",
  "deverified"), ``inet_up``/``inet_down``, ``geolocation`` (vast-docs
  ``api-reference/openapi/yaml/search_offers.yaml``; vast-cli ``vastai/data/offer.py``,
  ``vastai/api/offers.py``);
- the market metrics, ``GET /api/v0/metrics/gpu/current/``: ``{"success": true, "gpus": [{gpu_name,
  total, available, rented_verified, avail_verified, rented_unverified, avail_unverified, usage,
  usage_30d, price_p10, price_p25, price_median, price_p75, price_p90, ...}]}`` (``usage`` in
  per cent: vast-cli prints it under "Usage%"), or ``{"success":
  true, "gpus": [], "needs_machine": true}`` for a host with no machine (vast-docs
  ``api-reference/openapi/yaml/metrics_gpu.yaml``; vast-cli ``vastai/api/metrics.py``);
- ``GET /api/v0/metrics/gpu/history/``: ``{"success": true, "gpus": {NAME: {"supply_demand":
  {"timestamps": [...], ...}, "pricing": {"rented_p10": [...], "rented_median": [...], ...}}}}``
  (vast-cli ``vastai/cli/commands/metrics.py``).

An offer without a usable price or GPU count is set aside and counted, never guessed; a value of
the wrong type reads as missing; a price per GPU-hour outside (0, MAX_PRICE] is set aside as
absurd. Counts are bounded: at most MAX_OFFERS offers and MAX_GPU_ROWS metric rows are read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hostcheck.market.client import MarketError

MAX_OFFERS = 10_000
MAX_GPU_ROWS = 2_000
MAX_HISTORY_POINTS = 10_000
MAX_PRICE = 100.0
"""$/GPU-hour: above any GPU Vast lists (an H200 rents for a few dollars); past it, a typo or a trap."""
MAX_GPUS = 64
MAX_NAME_CHARS = 80
QUANTILES = ("p10", "p25", "median", "p75", "p90")
UNVERIFIED = "unverified"
"""Vast's word for a machine not (yet) verified, its ``verification`` field's value; also the
name of the unverified group of offers in the summary."""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _count(value: Any) -> int | None:
    number = _num(value)
    if number is None or number < 0 or number != int(number) or number > 10_000_000:
        return None
    return int(number)


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return None


def _name(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return " ".join(value.split())[:MAX_NAME_CHARS]


@dataclass(frozen=True)
class Offer:
    price: float
    """The renter's total per GPU-hour: ``dph_total / num_gpus``."""
    num_gpus: int
    verified: bool | None
    reliability: float | None
    rented: bool | None


@dataclass
class OfferSearch:
    offers: list[Offer] = field(default_factory=list)
    received: int = 0
    set_aside: dict[str, int] = field(default_factory=dict)

    def aside(self, why: str) -> None:
        self.set_aside[why] = self.set_aside.get(why, 0) + 1


def parse_offers(doc: Any, verified: bool | None, search: OfferSearch | None = None) -> OfferSearch:
    """Add the offers of one answer to ``search`` (a new one by default). ``verified``: what the
    query asked for, used where an offer does not say. MarketError when the answer has no
    offer list at all."""
    search = search if search is not None else OfferSearch()
    if not isinstance(doc, dict) or not isinstance(doc.get("offers"), list):
        raise MarketError("the offer search answered without an offer list")
    rows = doc["offers"]
    room = max(0, MAX_OFFERS - search.received)
    if len(rows) > room:
        why = f"past the first {MAX_OFFERS:,} read"
        search.set_aside[why] = search.set_aside.get(why, 0) + len(rows) - room
    for row in rows[:room]:
        search.received += 1
        if not isinstance(row, dict):
            search.aside("not an object")
            continue
        gpus = _count(row.get("num_gpus"))
        total = _num(row.get("dph_total"))
        if not gpus or gpus > MAX_GPUS:
            search.aside("no usable GPU count")
            continue
        if total is None:
            search.aside("no price")
            continue
        price = total / gpus
        if not 0 < price <= MAX_PRICE:
            search.aside(f"price per GPU-hour outside 0-{MAX_PRICE:g}")
            continue
        state = row.get("verification")
        said = {"verified": True, UNVERIFIED: False, "deverified": False}.get(state) if isinstance(state, str) else None
        reliability = _num(row.get("reliability"))
        if reliability is not None and not 0 <= reliability <= 1:
            reliability = None
        search.offers.append(Offer(price=price, num_gpus=gpus, verified=said if said is not None else verified,
                                   reliability=reliability, rented=_bool(row.get("rented"))))
    return search


@dataclass(frozen=True)
class GpuMetrics:
    gpu_name: str
    total: int | None
    available: int | None
    rented_verified: int | None
    avail_verified: int | None
    rented_unverified: int | None
    avail_unverified: int | None
    usage_pct: float | None
    usage_30d_pct: float | None
    prices: dict[str, float | None]
    """QUANTILES -> $/GPU-hour (price_p10 ... price_p90), None where absent or absurd."""

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _pct(value: Any) -> float | None:
    number = _num(value)
    return number if number is not None and 0 <= number <= 100 else None


def _price(value: Any) -> float | None:
    number = _num(value)
    return number if number is not None and 0 < number <= MAX_PRICE else None


@dataclass
class MetricsCurrent:
    rows: dict[str, GpuMetrics]
    needs_machine: bool


def parse_metrics_current(doc: Any) -> MetricsCurrent:
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        raise MarketError("the market metrics answered without a GPU list")
    rows: dict[str, GpuMetrics] = {}
    for row in doc["gpus"][:MAX_GPU_ROWS]:
        if not isinstance(row, dict) or (name := _name(row.get("gpu_name"))) is None:
            continue
        rows[name] = GpuMetrics(
            gpu_name=name, total=_count(row.get("total")), available=_count(row.get("available")),
            rented_verified=_count(row.get("rented_verified")), avail_verified=_count(row.get("avail_verified")),
            rented_unverified=_count(row.get("rented_unverified")),
            avail_unverified=_count(row.get("avail_unverified")),
            usage_pct=_pct(row.get("usage")), usage_30d_pct=_pct(row.get("usage_30d")),
            prices={q: _price(row.get(f"price_{q}")) for q in QUANTILES},
        )
    return MetricsCurrent(rows=rows, needs_machine=doc.get("needs_machine") is True)


@dataclass(frozen=True)
class PriceHistory:
    """The newest point of the history that has prices: what rented and available machines charge."""

    at: float
    rented: dict[str, float | None]
    available: dict[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "rented": self.rented, "available": self.available}


HISTORY_QUANTILES = ("p10", "median", "p90")


def parse_metrics_history(doc: Any, gpu_name: str) -> PriceHistory | None:
    """The newest point for ``gpu_name``; None when the answer holds none for it."""
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), dict):
        raise MarketError("the market history answered without a GPU table")
    data = doc["gpus"].get(gpu_name)
    if not isinstance(data, dict):
        return None
    sd, pr = data.get("supply_demand"), data.get("pricing")
    if not isinstance(sd, dict) or not isinstance(pr, dict) or not isinstance(sd.get("timestamps"), list):
        return None
    stamps = sd["timestamps"][:MAX_HISTORY_POINTS]

    def at(key: str, i: int) -> float | None:
        values = pr.get(key)
        return _price(values[i]) if isinstance(values, list) and i < len(values) else None

    for i in range(len(stamps) - 1, -1, -1):
        t = _num(stamps[i])
        if t is None:
            continue
        rented = {q: at(f"rented_{q}", i) for q in HISTORY_QUANTILES}
        available = {q: at(f"avail_{q}", i) for q in HISTORY_QUANTILES}
        if any(v is not None for v in (*rented.values(), *available.values())):
            return PriceHistory(at=t, rented=rented, available=available)
    return None
