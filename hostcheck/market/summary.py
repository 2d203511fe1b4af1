"""A snapshot summarised: how many comparable offers are listed, the share rented, price
percentiles, and where the owner's price stands. Pure: a function of the snapshot.

Percentiles are the linear interpolation between closest ranks (Hyndman and Fan's type 7, the
default of numpy and R, Excel's PERCENTILE.INC): for the n prices sorted, x[0] <= ... <= x[n-1],
the p-th percentile (0 <= p <= 1) is at h = (n - 1) * p and is
x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). p10 of [1, 2, 3, 4] is at
h = 0.3: 1 + 0.3 * (2 - 1) = 1.3; the median of an even count is the mean of the middle two.
Vast's own percentiles (the metrics' price_p10 ... price_p90) are Vast's, taken as they come.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from hostcheck.market.parse import QUANTILES, UNVERIFIED, Offer
from hostcheck.market.vast import Snapshot

QUANTILE_P = {"p10": 0.10, "p25": 0.25, "median": 0.50, "p75": 0.75, "p90": 0.90}
RELIABILITY_BANDS = (("0.99 and above", 0.99, 1.0), ("0.95 to 0.99", 0.95, 0.99), ("below 0.95", 0.0, 0.95))
STALE_S = 6 * 3600.0
FEW = 10
"""Fewer offers than this: each one moves the percentiles; said beside them."""


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """Type 7 (see the module's docstring) of an ascending sequence; None when it is empty."""
    if not ordered:
        return None
    if not 0 <= p <= 1:
        raise ValueError(f"p must be 0-1, not {p}")
    h = (len(ordered) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def quantiles(prices: Iterable[float]) -> dict[str, float] | None:
    ordered = sorted(prices)
    if not ordered:
        return None
    return {q: round(percentile(ordered, QUANTILE_P[q]) or 0.0, 4) for q in QUANTILES}


def _group(offers: list[Offer]) -> dict[str, Any]:
    return {"count": len(offers), "prices": quantiles(o.price for o in offers)}


def _rented_share(m: Any) -> tuple[float, str] | None:
    parts = (m.rented_verified, m.rented_unverified, m.avail_verified, m.avail_unverified)
    if all(v is not None for v in parts) and sum(parts) > 0:
        return 100.0 * (parts[0] + parts[1]) / sum(parts), "rented / (rented + available) machines now"
    if m.total and m.available is not None and m.available <= m.total:
        return 100.0 * (m.total - m.available) / m.total, "(total - available) / total machines now"
    return None


def summarise(snap: Snapshot, owner_price: float | None = None) -> dict[str, Any]:
    listed = [o for o in snap.offers.offers if o.rented is not True]
    marked_rented = len(snap.offers.offers) - len(listed)
    notes: list[str] = []
    bands: dict[str, Any] = {}
    for label, low, high in RELIABILITY_BANDS:
        bands[label] = _group([o for o in listed if o.reliability is not None and
                               low <= o.reliability and (o.reliability < high or high == 1.0)])
    bands["not given"] = _group([o for o in listed if o.reliability is None])
    out: dict[str, Any] = {
        "gpu_name": snap.gpu_name, "num_gpus": snap.num_gpus, "taken_at": snap.taken_at, "base_url": snap.base_url,
        "queries": list(snap.queries),
        "listed": {"all": _group(listed), "verified": _group([o for o in listed if o.verified is True]),
                   UNVERIFIED: _group([o for o in listed if o.verified is not True]), "reliability": bands},
        "set_aside": dict(snap.offers.set_aside), "limit_reached": list(snap.limit_reached),
        "metrics": None, "metrics_note": snap.metrics_note, "rented_prices": None, "available_prices": None,
        "occupancy": None, "price": None, "owner": None, "notes": notes,
    }
    if marked_rented:
        notes.append(f"{marked_rented} offer(s) marked rented in the search's answer left out of the listed prices")
    m = snap.metrics
    if m is not None:
        share = _rented_share(m)
        out["metrics"] = {"bucket": snap.metrics_bucket, "total": m.total, "available": m.available,
                          "rented_share_pct": None if share is None else round(share[0], 1),
                          "rented_share_how": None if share is None else share[1],
                          "usage_pct": m.usage_pct, "usage_30d_pct": m.usage_30d_pct, "prices": m.prices}
        if m.usage_30d_pct is not None:
            out["occupancy"] = {"pct": round(m.usage_30d_pct, 1), "from": "Vast's 30-day average utilisation"}
        elif m.usage_pct is not None:
            out["occupancy"] = {"pct": round(m.usage_pct, 1), "from": "Vast's utilisation now"}
        elif share is not None:
            out["occupancy"] = {"pct": round(share[0], 1), "from": f"share rented now, {share[1]}"}
    if snap.history is not None and snap.taken_at - snap.history.at > STALE_S:
        notes.append(f"the newest prices in Vast's history are {(snap.taken_at - snap.history.at) / 3600:.0f} hours "
                     "older than the snapshot")
    if snap.history is not None:
        out["rented_prices"] = {"at": snap.history.at, **snap.history.rented}
        out["available_prices"] = {"at": snap.history.at, **snap.history.available}
    rented_median = snap.history.rented.get("median") if snap.history is not None else None
    listed_median = out["listed"]["all"]["prices"]["median"] if listed else None
    if rented_median is not None:
        out["price"] = {"value": rented_median, "from": "the median of rented machines' prices, Vast's metrics"}
    elif m is not None and m.prices.get("median") is not None:
        out["price"] = {"value": m.prices["median"], "from": "the median of the model's prices, Vast's metrics"}
    elif listed_median is not None:
        out["price"] = {"value": listed_median, "from": "the median price of comparable offers listed, not rented"}
    if not listed and m is None:
        notes.append(f"no offer listed for {snap.gpu_name!r} x{snap.num_gpus}: if that is not how Vast spells the model "
                     "('RTX 3090'), the search finds nothing; Vast's list of names comes with its market metrics "
                     "(a host account's key)")
    if 0 < len(listed) < FEW:
        notes.append(f"only {len(listed)} comparable offer(s) listed: each one moves the percentiles")
    if owner_price is not None:
        same = sum(1 for o in listed if abs(o.price - owner_price) < 0.00005)
        below = sum(1 for o in listed if o.price < owner_price) - sum(
            1 for o in listed if o.price < owner_price and abs(o.price - owner_price) < 0.00005)
        out["owner"] = {"price": owner_price, "listed": len(listed), "cheaper": below, "same": same,
                        "dearer": len(listed) - below - same}
    return out
