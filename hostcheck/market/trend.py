"""The trend of recorded snapshots: per model and count, per UTC day, the mean rented share
and occupancy and the median of the snapshots' median prices; then the change from the first
day to the last. Pure: a function of the rows."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from typing import Any


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 1) if values else None


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _change(first: float | None, last: float | None, digits: int) -> float | None:
    return None if first is None or last is None else round(last - first, digits)


def trend(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (model, count): its days (oldest first) and the change over them."""
    models: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        day = datetime.fromtimestamp(row["t"], UTC).strftime("%Y-%m-%d")
        models.setdefault((row["gpu_name"], row["num_gpus"]), {}).setdefault(day, []).append(row)
    out = []
    for (name, gpus), days in sorted(models.items()):
        lines: list[dict[str, Any]] = []
        for day, rs in sorted(days.items()):
            def vals(key: str, rs: list[dict[str, Any]] = rs) -> list[float]:
                return [r[key] for r in rs if r[key] is not None]
            lines.append({"day": day, "snapshots": len(rs), "rented_share_pct": _mean(vals("rented_share_pct")),
                          "occupancy_pct": _mean(vals("occupancy_pct")), "listed": round(statistics.fmean(vals("listed"))),
                          "listed_median": _median(vals("listed_median")), "rented_median": _median(vals("rented_median"))})
        first, last = lines[0], lines[-1]
        out.append({"gpu_name": name, "num_gpus": gpus, "days": lines,
                    "change": {key: _change(first[key], last[key], 1 if key.endswith("pct") else 4)
                               for key in ("rented_share_pct", "occupancy_pct", "listed_median", "rented_median")}})
    return out
