"""The age of what hostcheck knows: when the platform rules a report judged by were read, and
which cited sources have not been re-read within a number of days.

A report's date is the *oldest* ``checked`` date among the sources of the policies it judged
(the owner-risk set included): every rule behind its verdicts was read on that day or later.
The newest date would only say that one rule is fresh, and hide the one a platform may have
changed since.

"Now" is the report's ``generated_at``; :func:`now` reads ``HOSTCHECK_NOW`` (an ISO 8601 date
or time) before the clock, so tests and the documentation's examples render a fixed day."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass

from hostcheck.errors import UsageError
from hostcheck.models import Policy, Source

STALE_AFTER_DAYS = 90
"""From this age on, the first screen says the rules may be out of date."""
NOW_ENV = "HOSTCHECK_NOW"


def now() -> dt.datetime:
    """``HOSTCHECK_NOW`` when set (a date means its midnight UTC), otherwise the clock, in UTC."""
    given = os.environ.get(NOW_ENV, "").strip()
    if not given:
        return dt.datetime.now(dt.UTC)
    try:
        when = dt.datetime.fromisoformat(given)
    except ValueError:
        raise UsageError(f"{NOW_ENV}={given[:40]!r}: not an ISO 8601 date or time (e.g. 2026-12-01)") from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def sources_of(policies: Iterable[Policy]) -> list[tuple[str, Source]]:
    """(policy id, source) for every source a policy lists, cited by a requirement or not."""
    rows: list[tuple[str, Source]] = []
    for policy in policies:
        listed = policy.sources or tuple({r.source.key: r.source for r in policy.requirements}.values())
        rows += [(policy.id, source) for source in listed]
    return rows


def rules_read(policies: Iterable[Policy]) -> str | None:
    """The oldest ``checked`` date of the sources the policies' requirements cite (None for none)."""
    dates = [r.source.checked for policy in policies for r in policy.requirements]
    return min(dates) if dates else None


def newest_read(policies: Iterable[Policy]) -> str | None:
    """The newest ``checked`` date among the policies' sources: the day of the latest reading,
    on which the documentation's examples and the golden screens are rendered."""
    dates = [source.checked for _, source in sources_of(policies)]
    return max(dates) if dates else None


def age_days(checked: str, today: dt.date) -> int:
    return (today - dt.date.fromisoformat(checked)).days


def stale_line(read: str | None, generated_at: str) -> str:
    """The first screen's one line when the rules are :data:`STALE_AFTER_DAYS` old or older, else ''."""
    if read is None:
        return ""
    days = age_days(read, dt.datetime.fromisoformat(generated_at).date())
    if days < STALE_AFTER_DAYS:
        return ""
    return f"Platform rules read {read} ({days} days ago) may be outdated: update hostcheck."


@dataclass(frozen=True)
class StaleSource:
    policy: str
    key: str
    checked: str
    days: int
    url: str
    title: str


def stale_sources(policies: Iterable[Policy], today: dt.date, days: int) -> list[StaleSource]:
    """The sources not re-read within the last ``days`` days (read ``days`` or more days before
    ``today``; with 0, every one), oldest first."""
    rows = [StaleSource(policy, s.key, s.checked, age_days(s.checked, today), s.url, s.title)
            for policy, s in sources_of(policies)]
    return sorted((r for r in rows if r.days >= days), key=lambda r: (r.checked, r.policy, r.key))
