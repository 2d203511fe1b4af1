"""``hostcheck earnings --market``: the market's price and occupancy (a summary from
:mod:`hostcheck.market.summary`) where the owner gave none, and beside the owner's where given.

The snapshot is Vast's market, so its price is Vast's only (``platform_price["vast"]``); its
occupancy, where used, is said to be Vast's. Each figure taken says where it came from and when.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

PLATFORM = "vast"


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def fill(values: dict[str, Any], market: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bool]]:
    """The values with the market's figures where the owner gave none, and which were taken."""
    out = dict(values)
    used = {"price": False, "occupancy": False}
    owner_price = values.get("price") is not None or PLATFORM in (values.get("platform_price") or {})
    if not owner_price and market.get("price"):
        out["platform_price"] = {**(values.get("platform_price") or {}), PLATFORM: market["price"]["value"]}
        used["price"] = True
    if values.get("occupancy") is None and market.get("occupancy"):
        out["occupancy"] = market["occupancy"]["pct"]
        used["occupancy"] = True
    return out, used


def _place(values: list[float], x: float, spec: str, unit: str, what: str) -> str:
    """Where ``x`` falls among a table's ascending row or column values (shown as the table
    shows them: ``spec`` is their format)."""
    for v in values:
        if abs(v - x) < 1e-9:
            return f"the {v:{spec}}{unit} {what}"
    lower = [v for v in values if v < x]
    upper = [v for v in values if v > x]
    if lower and upper:
        return f"between the {lower[-1]:{spec}}{unit} and {upper[0]:{spec}}{unit} {what}s"
    return f"{'above' if lower else 'below'} the table's {what}s"


def mark(report: dict[str, Any], market: dict[str, Any], used: dict[str, bool], only_vast: bool,
         values: dict[str, Any]) -> None:
    """Label the figures taken from the market, put the owner's beside the market's, and say
    where the market's point is in Vast's sensitivity table. Changes ``report`` in place."""
    report["market"] = market
    taken = f"from the market, {_when(market['taken_at'])}"
    notes: list[str] = []
    price = market.get("price")
    occupancy = market.get("occupancy")
    vast = next((p for p in report["platforms"] if p["platform"] == PLATFORM), None)
    if vast is not None and used["price"]:
        vast["price_from"] = taken
    if used["occupancy"] and occupancy and len(report["platforms"]) > 1:
        notes.append(f"the occupancy {occupancy['pct']:g} % is Vast's market's, used for every platform shown")
    if price and not used["price"]:
        own = (values.get("platform_price") or {}).get(PLATFORM, values.get("price"))
        notes.append(f"your price {own:g} per GPU-hour beside the market's {price['value']:.3f} ({price['from']})")
    if occupancy and not used["occupancy"] and values.get("occupancy") is not None:
        notes.append(f"your occupancy {values['occupancy']:g} % beside the market's {occupancy['pct']:g} % "
                     f"({occupancy['from']})")
    sens = vast.get("sensitivity") if vast is not None else None
    if sens and price and occupancy:
        col = _place(sens["price_per_gpu_hour"], price["value"], ".3f", "", "price column")
        row = _place(sens["occupancy_pct"], occupancy["pct"], "g", " %", "occupancy row")
        notes.append(f"in Vast's sensitivity table, the market's point ({price['value']:.3f} per GPU-hour, "
                     f"{occupancy['pct']:g} %) is in {col}, {row}")
    if only_vast:
        notes.append("the market read is Vast's: only Vast is shown (--platform NAME adds others)")
    report["notes"][:0] = notes
