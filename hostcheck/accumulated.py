"""Reading facts that accumulate over time (declared as counters and windows in
:mod:`hostcheck.fact_paths`): how much of the time they cover something took."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hostcheck.facts import Unknown

_BOUNDS = {"since": "read_at", "start": "end"}


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def covered_s(fact: Any) -> float | Unknown:
    """The seconds a counter (since -> read_at) or a window (start -> end) covers."""
    if not isinstance(fact, dict):
        return Unknown("not a counter or a window")
    for first, last in _BOUNDS.items():
        if first in fact:
            begin, end = _time(fact.get(first)), _time(fact.get(last))
            if begin is None or end is None or begin.tzinfo is None or end.tzinfo is None:
                return Unknown(f"its {first} or {last} is not a time with a zone")
            seconds = (end - begin).total_seconds()
            return seconds if seconds > 0 else Unknown(f"it covers no time ({first} is not before {last})")
    return Unknown("not a counter or a window")


def share(fact: Any) -> float | Unknown:
    """``total`` (in seconds) as a share of the time the fact covers, 0..1."""
    seconds = covered_s(fact)
    if isinstance(seconds, Unknown):
        return seconds
    total = fact.get("total")
    if isinstance(total, bool) or not isinstance(total, (int, float)) or total < 0:
        return Unknown("its total is not a number of seconds")
    if total > seconds * 1.01:
        return Unknown(f"its total ({total:g} s) is longer than the {seconds:g} s it covers")
    return min(1.0, total / seconds)
