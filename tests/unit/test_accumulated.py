"""Counters and windows: the share of the covered time, computed from the rule
(total / (end - start)), and every way the fact can be unusable."""

from __future__ import annotations

from typing import Any

import pytest

from hostcheck.accumulated import covered_s, share
from hostcheck.facts import Unknown

DAY = 86400


@pytest.mark.parametrize(("fact", "expected"), [
    ({"total": 3600, "since": "2026-12-01T00:00:00+00:00", "read_at": "2026-12-02T00:00:00+00:00"}, 3600 / DAY),
    ({"total": 0, "start": "2026-12-01T10:00:00+00:00", "end": "2026-12-01T11:00:00+00:00"}, 0.0),
    ({"total": 900, "start": "2026-12-01T10:00:00+01:00", "end": "2026-12-01T10:00:00+00:00"}, 900 / 3600),
])
def test_share_is_the_total_over_the_covered_time(fact: dict[str, Any], expected: float) -> None:
    assert share(fact) == pytest.approx(expected)


@pytest.mark.parametrize(("fact", "says"), [
    ({"total": 1, "since": "2026-12-02T00:00:00+00:00", "read_at": "2026-12-01T00:00:00+00:00"}, "covers no time"),
    ({"total": 1, "since": "yesterday", "read_at": "2026-12-01T00:00:00+00:00"}, "not a time"),
    ({"total": 1, "since": "2026-12-01T00:00:00", "read_at": "2026-12-02T00:00:00"}, "not a time with a zone"),
    ({"total": "1", "since": "2026-12-01T00:00:00+00:00", "read_at": "2026-12-02T00:00:00+00:00"}, "not a number"),
    ({"total": 2 * DAY, "since": "2026-12-01T00:00:00+00:00", "read_at": "2026-12-02T00:00:00+00:00"}, "longer than"),
    ({"value": 1}, "not a counter or a window"),
    (Unknown("x"), "not a counter or a window"),
])
def test_an_unusable_counter_is_unknown_with_the_reason(fact: Any, says: str) -> None:
    result = share(fact)
    assert isinstance(result, Unknown) and says in result.reason


def test_covered_seconds() -> None:
    assert covered_s({"start": "2026-12-01T00:00:00+00:00", "end": "2026-12-01T00:01:30+00:00"}) == 90
