"""Reliability checks (REL-*): the window a `hostcheck watch` recording gives, judged by each
platform's published rule. No recording is unknown (with what to run), never a pass."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import CheckResult, check, compare, family, unknown
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.recording.analysis import Segment
from hostcheck.watch.rules import runpod_over, runpod_rule
from hostcheck.wording import counted

REL = family("REL", "Reliability (recorded)", order=120)

MIN_DAYS = 1.0  # less than a day of recording says too little about a home line
ADVISED_DAYS = 7


def _days(n: int) -> str:
    return counted(n, "day")


def _window(facts: dict[str, Any], days_wanted: int) -> dict[str, Any]:
    watch = lookup(facts, "watch")
    if isinstance(watch, Unknown) or not isinstance(watch, dict) or not watch.get("present"):
        why = watch.reason if isinstance(watch, Unknown) else (watch.get("reason") if isinstance(watch, dict) else None)
        if isinstance(watch, dict) and why and not why.startswith("no watch database"):
            # A recording is there but cannot be used (unreadable, damaged, foreign): say that.
            raise Missing("watch", f"unknown: {why}")
        raise Missing("watch", f"unknown: run `hostcheck watch` for {_days(days_wanted)} ({why or 'no watch database'})")
    days = float(_field(watch, "observed_days"))
    if days < MIN_DAYS:
        more = max(1, round(days_wanted - days))
        raise Missing("watch", f"the recording covers only {days:.2f} days: run `hostcheck watch` for {_days(more)} more")
    return watch


def _field(watch: dict[str, Any], key: str) -> Any:
    """A field of the recording's summary; :class:`Missing` when it is not there (never a 0)."""
    value = watch.get(key)
    if value is None or isinstance(value, Unknown):
        raise Missing(f"watch.{key}", value.reason if isinstance(value, Unknown) else "not in the recording's summary")
    return value


def _span(watch: dict[str, Any]) -> str:
    return f"window {watch['window_start']} to {watch['window_end']} ({watch['observed_days']:g} days observed)"


@check(
    "REL-1010",
    title="Uptime over the recorded window",
    op=">=",
    unit="%",
    threshold="number",
    why="Platforms rank and verify hosts by uptime; a home line loses it to ISP resets, power cuts and driver "
    "crashes, which a one-time audit cannot see. The rehearsal measures what a platform would.",
    fix="Find the causes in `hostcheck watch report` (outages with causes); a UPS, a wired link and a held "
    "driver remove the usual ones.",
    fix_role="hostcheck_watch: hostcheck_watch_enabled",
)
def uptime(facts: dict[str, Any], threshold: Any) -> CheckResult:
    watch = _window(facts, ADVISED_DAYS)
    value = watch.get("uptime_pct")
    if value is None:
        return unknown("nothing observed in the window")
    return compare(value, threshold, _span(watch))


@check(
    "REL-1020",
    title="Runpod reliability score, (minutes up + 10) / minutes",
    op=">=",
    unit="%",
    threshold="number",
    why="Runpod removed Community Cloud machines whose rolling 30-day reliability fell below 98 %.",
    fix="Remove the outages the rehearsal shows; book maintenance ahead rather than going offline.",
    fix_role="hostcheck_watch: hostcheck_watch_enabled",
)
def runpod_score(facts: dict[str, Any], threshold: Any) -> CheckResult:
    """Runpod's formula is defined on 30 days: judged as written once 30 days are observed. A
    shorter recording is not enough data, unless its downtime alone already puts any 30-day
    window holding it under the threshold (its best case, below). The formula is applied here,
    to the recorded stretches, with the window from the rule's data and the policy's threshold."""
    rule = runpod_rule()
    days_wanted = int(rule["window_days"])
    watch = _window(facts, days_wanted)
    stretches = _field(watch, "segments")
    if not isinstance(stretches, list):
        raise Missing("watch.segments", "not a list")
    segments = [Segment(float(s["start"]), float(s["end"]), str(s["state"])) for s in stretches]
    score = runpod_over("runpod", rule, segments, float(threshold) / 100)
    if score.score is not None and "best_pct" not in score.numbers:
        return compare(round(score.score * 100, 4), threshold, _span(watch))
    best = score.numbers.get("best_pct")
    if best is None:
        return unknown("nothing observed in the window")
    if isinstance(threshold, (int, float)) and best < threshold:
        return compare(best, threshold, f"{_span(watch)}; the downtime recorded so far puts any {days_wanted}-day window "
                       f"holding it at {best:g} % at most")
    return unknown(f"not enough data: {watch['observed_days']:g} of {days_wanted} days observed (Runpod's window); "
                   f"the {days_wanted}-day score can still reach {best:g} %; run `hostcheck watch` for "
                   f"{_days(max(1, round(days_wanted - float(watch['observed_days']))))} more", measured=best)


@check(
    "REL-1030",
    title="Continuous uptime now",
    op=">",
    unit="h",
    threshold="number",
    why="io.net pays block rewards only after more than 5 hours of continuous uptime; every restart resets it.",
    fix="Keep the host up: no reboots for updates while listed, a UPS against short power cuts.",
    fix_role="hostcheck_watch: hostcheck_watch_enabled",
)
def continuous(facts: dict[str, Any], threshold: Any) -> CheckResult:
    watch = _window(facts, 1)
    return compare(_field(watch, "current_up_h"), threshold,
                   f"{_span(watch)}; longest run {watch.get('longest_up_h')} h")


@check(
    "REL-1040",
    title="Unclean stops (power cuts, resets) in the window",
    op="<=",
    unit="stops",
    threshold="number",
    why="A stop without shutdown kills renters' jobs mid-run; Vast notes a crash mid-job can lower "
    "reliability permanently.",
    fix="A UPS with NUT shutting the host down cleanly; check the PSU and the kernel log before the stop.",
)
def unclean(facts: dict[str, Any], threshold: Any) -> CheckResult:
    watch = _window(facts, ADVISED_DAYS)
    return compare(int(_field(watch, "unclean_stops")), threshold, _span(watch))


@check(
    "REL-1050",
    title="GPU faults needing a reboot or pointing at hardware",
    op="<=",
    unit="faults",
    threshold="number",
    why="Xid errors such as 79 (fallen off the bus) or 48 (double-bit ECC), and PCIe AER errors, take the GPU "
    "away from renters; Vast's daemon reports AER lines and NVML errors to Vast.",
    fix="See NVIDIA's Xid catalogue for the code's action; reseat the card and riser, check power and cooling.",
)
def gpu_faults(facts: dict[str, Any], threshold: Any) -> CheckResult:
    watch = _window(facts, ADVISED_DAYS)
    faults = _field(watch, "gpu_faults")
    if not isinstance(faults, list):
        raise Missing("watch.gpu_faults", "not a list")
    names = ", ".join(f"Xid {f['code']}" if f["kind"] == "xid" else f"AER {f['severity']}" for f in faults[:5])
    return compare(len(faults), threshold, f"{_span(watch)}" + (f"; {names}" if names else ""))
