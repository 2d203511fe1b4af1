"""`hostcheck fleet watch DIR...`: every host's reliability rehearsal side by side, worst first.

Input is what `playbooks/watch-report.yml` fetches: one `<host>.watch.json` per host, the
host's `hostcheck watch report --format json`, or ``{"unavailable": "<why>"}`` where the
playbook could not get one. Reports come from other machines: each is read alone (the size
limit of every input), only the keys the summary needs are taken, and a report that does not
have their shape becomes its host's row with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from hostcheck import safeio
from hostcheck.errors import FileInputError, FleetError
from hostcheck.fleet.reports import WATCH_SUFFIX, fleet_source
from hostcheck.recording.analysis import DOWN_CAUSES

VERDICT_ORDER = {"below": 0, "unknown": 1, "meets": 2}


class RulePart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: str
    score: float | None = None


class WatchRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str
    readable: bool
    reason: str | None = None
    observed_days: float | None = None
    not_recorded_days: float | None = None
    uptime: float | None = None
    outages: dict[str, int] = {}
    down_minutes: dict[str, float] = {}
    platforms: dict[str, RulePart] = {}

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def summary_of(host: str, data: Any) -> WatchRow:
    """The summary of one host's watch report (ValueError: not one)."""
    if isinstance(data, dict) and isinstance(data.get("unavailable"), str):
        return WatchRow(host=host, readable=False, reason=data["unavailable"][:500])
    if not isinstance(data, dict) or not isinstance(data.get("window"), dict) or not isinstance(data.get("outages"), list) \
            or not isinstance(data.get("platforms"), list):
        raise ValueError("not a `hostcheck watch report --format json` output (window, outages, platforms)")
    window = data["window"]
    observed, missing = _number(window.get("observed_s")), _number(window.get("not_recorded_s"))
    outages = dict.fromkeys(DOWN_CAUSES, 0)
    down = dict.fromkeys(DOWN_CAUSES, 0.0)
    for outage in data["outages"]:
        if isinstance(outage, dict) and outage.get("cause") in outages:
            outages[outage["cause"]] += 1
            down[outage["cause"]] += (_number(outage.get("seconds")) or 0.0) / 60.0
    platforms = {}
    for rule in data["platforms"]:
        if isinstance(rule, dict) and isinstance(rule.get("rule"), str) and rule.get("verdict") in VERDICT_ORDER:
            platforms[rule["rule"][:40]] = RulePart(verdict=rule["verdict"], score=_number(rule.get("score")))
    uptime = _number(data.get("uptime"))
    return WatchRow(host=host, readable=True, observed_days=None if observed is None else round(observed / 86400, 4),
                    not_recorded_days=None if missing is None else round(missing / 86400, 4),
                    uptime=uptime if uptime is None or 0 <= uptime <= 1 else None,
                    outages={k: v for k, v in outages.items() if v},
                    down_minutes={k: round(v, 1) for k, v in down.items() if v}, platforms=platforms)


def read_rows(paths: list[Path]) -> tuple[list[WatchRow], list[str]]:
    """One row per host, reading one report at a time; and why each unusable one could not be read."""
    source = fleet_source(paths, WATCH_SUFFIX)
    rows, problems = [], []
    for path in source.files:
        host = path.name.removesuffix(WATCH_SUFFIX)
        try:
            row = summary_of(host, safeio.load_json(path))
        except (FileInputError, ValueError) as exc:
            row = WatchRow(host=host, readable=False, reason=f"{path}: {exc}")
            problems.append(row.reason or "")
        rows.append(row)
    if not rows:
        raise FleetError(f"no watch reports (*{WATCH_SUFFIX}) found in {', '.join(map(str, paths))}")
    return rows, problems


def worst_first(rows: list[WatchRow]) -> list[WatchRow]:
    """Hosts without a report first; then the most platform rules below; then the lowest uptime
    (unknown before any measured); then the most down time."""

    def key(row: WatchRow) -> tuple[Any, ...]:
        if not row.readable:
            return (0, 0, 0.0, 0.0, row.host)
        below = -sum(1 for p in row.platforms.values() if p.verdict == "below")
        uptime = -1.0 if row.uptime is None else row.uptime
        return (1, below, uptime, -sum(row.down_minutes.values()), row.host)

    return sorted(rows, key=key)
