"""Uptime, outages and their causes, from a recording. Pure functions of what was recorded.

Each sample stands for the interval that follows it, until the next sample (at most
``interval * GRACE`` later). A sample is *up* when at least one network target answered and
the GPU did not fail; *network* when every target failed; *driver* when NVML failed or a
reboot-needing Xid was logged in this boot. Time between samples that is longer than that:

- across a boot change: *reboot* when the previous boot's journal shows a shutdown,
  *power* (unclean stop: power cut, reset, panic) when it shows none; when the journal holds
  no record of that boot, the recorder's own stop decides (SIGTERM from systemd's shutdown:
  *reboot*; no stop at all: *power*);
- within one boot: *suspend* when CLOCK_BOOTTIME ran ahead of CLOCK_MONOTONIC; otherwise
  *not recorded* (the recorder was stopped, killed, or could not write), which is left out of
  the window rather than counted as up or down: nothing was measured then.

Outages are runs of down time with one cause; their length is within one sample interval of
the truth (the state changed somewhere between two samples).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from hostcheck.watch.store import Boot, Event, Recording, Sample

GRACE = 2.0
GRACE_EXTRA_S = 5.0
UP = "up"
NOT_RECORDED = "not recorded"
DOWN_CAUSES = ("power", "reboot", "network", "driver", "suspend")


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    state: str  # "up" | one of DOWN_CAUSES | "not recorded"
    note: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Analysis:
    segments: list[Segment]
    window_start: float | None
    window_end: float | None
    up_s: float
    down_s: float
    not_recorded_s: float
    outages: list[Segment]
    events: list[Event]
    boots: list[Boot]
    per_day: list[dict[str, Any]] = field(default_factory=list)

    @property
    def observed_s(self) -> float:
        return self.up_s + self.down_s

    @property
    def uptime(self) -> float | None:
        return None if self.observed_s <= 0 else self.up_s / self.observed_s

    def longest_up_s(self) -> float:
        return max((s.seconds for s in _runs(self.segments, UP)), default=0.0)

    def current_up_s(self) -> float:
        """The up run that reaches the end of the window (0 when the window ends down)."""
        runs = _runs(self.segments, UP)
        if not runs or self.window_end is None or abs(runs[-1].end - self.window_end) > 1e-6:
            return 0.0
        return runs[-1].seconds


def _runs(segments: list[Segment], state: str) -> list[Segment]:
    """Merge adjacent segments of ``state``; a not-recorded stretch breaks a run too (nothing
    says the host stayed up)."""
    out: list[Segment] = []
    for seg in segments:
        if seg.state != state:
            continue
        if out and abs(out[-1].end - seg.start) < 1e-6:
            out[-1] = Segment(out[-1].start, seg.end, state, out[-1].note)
        else:
            out.append(seg)
    return out


def sample_state(s: Sample) -> tuple[str, str]:
    if s.net_total > 0 and s.net_ok == 0:
        return "network", f"all {s.net_total} targets failed"
    if s.gpu_ok is False:
        return "driver", str(s.detail.get("nvml") or "GPU failed (NVML or a reboot-needing Xid)")
    return UP, ""


def _between(events: list[Event], kind: str, start: float, end: float) -> list[Event]:
    return [e for e in events if e.kind == kind and start <= e.t <= end]


def _gap_state(a: Sample, b: Sample, boots: dict[str, Boot], events: list[Event]) -> tuple[float, str, str]:
    """(where the gap starts, its state, a note) for the time between samples a and b."""
    start = a.t + a.interval_s
    if b.boot_id != a.boot_id:
        boot = boots.get(a.boot_id)
        if boot is not None and boot.last_t is not None and a.t <= boot.last_t < start:
            start = boot.last_t  # the journal saw the boot end before the sample's interval did
        if boot is None or boot.clean is None:
            # No journal record either way (a volatile journal keeps no earlier boots): the
            # recorder's own stop says more. systemd stops it with SIGTERM on a shutdown.
            stops = [e for e in events if e.kind == "recorder_stop" and e.boot_id == a.boot_id and e.t >= a.t]
            if stops and stops[0].detail.get("reason") == "SIGTERM":
                return start, "reboot", "the recorder was stopped by SIGTERM as the boot ended (no journal record of the boot)"
            if not stops:
                return start, "power", "unclean stop: the recorder was never stopped and the journal has no record of the boot"
            return start, "reboot", "clean or not: unknown (" + (boot.evidence if boot else "boot not in the journal") + ")"
        if boot.clean:
            return start, "reboot", boot.evidence
        return start, "power", "unclean stop: " + boot.evidence
    suspended = (b.boottime - a.boottime) - (b.mono - a.mono)
    if suspended > GRACE_EXTRA_S:
        return start, "suspend", f"suspended for {suspended / 60:.1f} min"
    gaps = _between(events, "gap", a.t, b.t + b.interval_s)
    if gaps:
        return start, NOT_RECORDED, str(gaps[0].detail.get("reason", "not written"))
    stops = _between(events, "recorder_stop", a.t, b.t)
    if stops:
        return start, NOT_RECORDED, f"the recorder was stopped ({stops[0].detail.get('reason', '?')})"
    return start, NOT_RECORDED, "the recorder was not running (killed or stalled)"


def segments_of(recording: Recording) -> list[Segment]:
    samples = sorted(recording.samples, key=lambda s: s.t)
    boots = {b.boot_id: b for b in recording.boots}
    out: list[Segment] = []
    for a, b in zip(samples, [*samples[1:], None], strict=True):
        state, note = sample_state(a)
        limit = a.t + a.interval_s * GRACE + GRACE_EXTRA_S
        if b is None:
            out.append(Segment(a.t, a.t + a.interval_s, state, note))
        elif b.t <= limit and b.boot_id == a.boot_id:  # a new boot is a stop, however quick
            out.append(Segment(a.t, b.t, state, note))
        else:
            gap_start, gap_state, gap_note = _gap_state(a, b, boots, recording.events)
            gap_start = max(a.t, min(gap_start, b.t))
            if gap_start > a.t:
                out.append(Segment(a.t, gap_start, state, note))
            out.append(Segment(gap_start, b.t, gap_state, gap_note))
    return _merge(out)


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for seg in segments:
        if seg.seconds <= 0:
            continue
        if out and out[-1].state == seg.state and abs(out[-1].end - seg.start) < 1e-6 and out[-1].note == seg.note:
            out[-1] = Segment(out[-1].start, seg.end, seg.state, seg.note)
        else:
            out.append(seg)
    return out


def _day(t: float) -> dt.date:
    return dt.datetime.fromtimestamp(t, dt.UTC).date()


def split_by_day(segments: list[Segment]) -> dict[dt.date, list[Segment]]:
    days: dict[dt.date, list[Segment]] = {}
    for seg in segments:
        start = seg.start
        while start < seg.end:
            day = _day(start)
            midnight = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC).timestamp()
            end = min(seg.end, midnight)
            days.setdefault(day, []).append(Segment(start, end, seg.state, seg.note))
            start = end
    return days


def analyse(recording: Recording) -> Analysis:
    segments = segments_of(recording)
    up = sum(s.seconds for s in segments if s.state == UP)
    down = sum(s.seconds for s in segments if s.state in DOWN_CAUSES)
    missing = sum(s.seconds for s in segments if s.state == NOT_RECORDED)
    outages: list[Segment] = []
    for seg in segments:
        if seg.state not in DOWN_CAUSES:
            continue
        if outages and outages[-1].state == seg.state and abs(outages[-1].end - seg.start) < 1e-6:
            outages[-1] = Segment(outages[-1].start, seg.end, seg.state, outages[-1].note)
        else:
            outages.append(seg)
    per_day = []
    for day, parts in sorted(split_by_day(segments).items()):
        d_up = sum(s.seconds for s in parts if s.state == UP)
        d_down = sum(s.seconds for s in parts if s.state in DOWN_CAUSES)
        per_day.append(
            {
                "day": day.isoformat(),
                "up_s": round(d_up, 1),
                "down_s": round(d_down, 1),
                "not_recorded_s": round(sum(s.seconds for s in parts if s.state == NOT_RECORDED), 1),
                "uptime": None if d_up + d_down <= 0 else d_up / (d_up + d_down),
            }
        )
    return Analysis(
        segments=segments,
        window_start=segments[0].start if segments else None,
        window_end=segments[-1].end if segments else None,
        up_s=up,
        down_s=down,
        not_recorded_s=missing,
        outages=outages,
        events=recording.events,
        boots=recording.boots,
        per_day=per_day,
    )
