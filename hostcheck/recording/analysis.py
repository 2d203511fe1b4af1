"""Uptime, outages and their causes, from a recording. Pure functions of what was recorded.

Time: within one boot, samples are ordered and measured by the boot's own clocks
(CLOCK_BOOTTIME, which runs during suspend, and CLOCK_MONOTONIC, which does not); neither is
stepped by NTP or by hand. The wall clock only places each boot on the calendar: a boot sits
where the wall clock of its last sample puts it (the wall clock after any correction NTP made
during the boot). So a clock stepped back or forward is an event in the report, never an
outage, and never hides one. Events the recorder saw itself carry the boot clock too and are
placed the same way; lines read from logs keep the log's own time.

Each sample stands for the interval that follows it, until the next sample (at most
``interval * GRACE`` later). A sample is *up* when at least one network target answered and
the GPU did not fail; *network* when every target failed; *driver* when NVML failed or an Xid
that takes the GPU out of service (NVIDIA's catalogue: a GPU reset or a reboot) was logged in
this boot. Time between samples that is longer than that:

- across a boot change: *reboot* when the previous boot's journal shows a shutdown,
  *power* (unclean stop: power cut, reset, panic) when it shows none; when the journal holds
  no record of that boot, the recorder's own stop decides (SIGTERM from systemd's shutdown:
  *reboot*; no stop at all: *power*). The new boot's clock at its first sample is how long it
  had been up, so the outage is never shorter than that, whatever the wall clocks say;
- within one boot: *suspend* when CLOCK_BOOTTIME ran ahead of CLOCK_MONOTONIC; otherwise
  *not recorded* (the recorder was stopped, killed, or could not write), which is left out of
  the window rather than counted as up or down: nothing was measured then.

Outages are runs of down time with one cause; their length is within one sample interval of
the truth (the state changed somewhere between two samples).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from hostcheck.recording.drift import Drift, drift
from hostcheck.recording.store import Boot, Event, Recording, Sample

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


@dataclass(frozen=True)
class GpuHealth:
    """What NVML's counters added up to over the window, for one GPU."""

    gpu: int
    thermal_s: float  # NVML's thermal violation counter, summed between consecutive samples
    power_s: float  # its power violation counter, likewise
    counted_s: float  # the time those sums cover (consecutive samples that read the counter)
    ecc_corrected: int  # increases of the volatile corrected ECC count seen in the window
    ecc_uncorrected: int
    ecc_counted: bool = True  # False: NVML reported no ECC counts for this GPU (GeForce cards have none)

    def share(self, seconds: float) -> float | None:
        return None if self.counted_s <= 0 else min(1.0, seconds / self.counted_s)


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
    gpu_health: list[GpuHealth] = field(default_factory=list)
    drift: list[Drift] = field(default_factory=list)
    interval_s: float | None = None  # the longest sampling interval in the window: a shorter outage can go unseen

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
        return "driver", str(s.detail.get("nvml") or "GPU failed (NVML, or an Xid that takes it out of service)")
    return UP, ""


# ------------------------------------------------------------------ placing samples in time


@dataclass(frozen=True)
class Placed:
    at: float  # calendar time: the boot's anchor plus the sample's boot clock
    s: Sample


def boot_anchors(samples: list[Sample]) -> dict[str, float]:
    """Per boot, wall time minus boot clock at its last sample: where the boot began."""
    anchors: dict[str, float] = {}
    last_bt: dict[str, float] = {}
    for s in samples:
        if s.boot_id not in last_bt or s.boottime >= last_bt[s.boot_id]:
            last_bt[s.boot_id] = s.boottime
            anchors[s.boot_id] = s.t - s.boottime
    return anchors


def place(samples: list[Sample]) -> list[Placed]:
    """Samples in the order they were taken: boots in the order they were recorded (the
    writer appends as it goes), each boot's samples by its own clock; each at its calendar time."""
    anchors = boot_anchors(samples)
    order: dict[str, int] = {}
    for s in samples:
        order.setdefault(s.boot_id, len(order))
    ordered = sorted(samples, key=lambda s: (order[s.boot_id], s.boottime, s.mono))
    return [Placed(anchors[s.boot_id] + s.boottime, s) for s in ordered]


def place_event(e: Event, anchors: dict[str, float]) -> Event:
    if e.boottime is None or e.boot_id not in anchors:
        return e
    return dataclasses.replace(e, t=anchors[e.boot_id] + e.boottime)


def _seen_between(events: list[Event], kind: str, a: Sample, b: Sample | None, slack_s: float) -> list[Event]:
    """Events of ``kind`` the recorder wrote in a's boot after a (and before b, in the same boot)."""
    out = []
    for e in events:
        if e.kind != kind or e.boot_id != a.boot_id:
            continue
        if e.boottime is not None:
            upper = b.boottime + slack_s if b is not None and b.boot_id == a.boot_id else float("inf")
            if a.boottime <= e.boottime <= upper:
                out.append(e)
        else:  # written without the boot clock (an older database): its wall time is all there is
            upper = b.t + slack_s if b is not None and b.boot_id == a.boot_id else float("inf")
            if a.t <= e.t <= upper:
                out.append(e)
    return out


def _kernel(boot_id: str) -> str:
    """The kernel's boot id (a container boot's key adds its own start after a dot)."""
    return boot_id.split(".", 1)[0]


def _covered_until(a: Placed, b: Placed | None, events: list[Event]) -> float:
    """Where sample a stops covering time: its interval's end, or the recorder's stop after it
    when that came sooner (one sample and a stop 0.45 s later cover 0.45 s, not the interval)."""
    end = a.at + a.s.interval_s
    stops = _seen_between(events, "recorder_stop", a.s, b.s if b is not None else None, 0.0)
    if stops:
        e = stops[0]
        stopped = a.at + (e.boottime - a.s.boottime) if e.boottime is not None else a.at + (e.t - a.s.t)
        end = min(end, max(a.at, stopped))
    return end


def _gap_state(a: Placed, b: Placed, boots: dict[str, Boot], events: list[Event]) -> tuple[float, float, str, str]:
    """(where the gap starts, where it ends, its state, a note) for the time between samples a and b."""
    start = _covered_until(a, b, events)
    end = b.at
    if b.s.boot_id != a.s.boot_id:
        if _kernel(b.s.boot_id) == _kernel(a.s.boot_id) and b.s.boottime >= a.s.boottime:
            # A container's boots share their kernel's clock: it measured the stop itself.
            end = a.at + (b.s.boottime - a.s.boottime)
            suffix = ""
        elif end - b.s.boottime < a.at:
            # The two boots' wall clocks disagree (one of them never synchronised): the new
            # boot had been up for b.boottime at its first sample, so the outage was at least
            # as long as that before it; no more can be known.
            end = max(start, a.at) + max(0.0, b.s.boottime)
            suffix = "; its length is a lower bound: the two boots' wall clocks disagree"
        else:
            suffix = ""
        boot = boots.get(a.s.boot_id)
        if boot is not None and boot.last_t is not None and a.s.t <= boot.last_t < a.s.t + a.s.interval_s:
            # The journal saw the boot end before the sample's interval did.
            start = min(start, a.at + (boot.last_t - a.s.t))
        if boot is None or boot.clean is None:
            # No journal record either way (a volatile journal keeps no earlier boots): the
            # recorder's own stop says more. systemd stops it with SIGTERM on a shutdown.
            stops = _seen_between(events, "recorder_stop", a.s, None, 0.0)
            if stops and stops[0].detail.get("reason") == "SIGTERM":
                return start, end, "reboot", "the recorder was stopped by SIGTERM as the boot ended (no journal record of the boot)" + suffix
            if not stops:
                return start, end, "power", "unclean stop: the recorder was never stopped and the journal has no record of the boot" + suffix
            return start, end, "reboot", "clean or not: unknown (" + (boot.evidence if boot else "boot not in the journal") + ")" + suffix
        if boot.clean:
            return start, end, "reboot", boot.evidence + suffix
        return start, end, "power", "unclean stop: " + boot.evidence + suffix
    suspended = (b.s.boottime - a.s.boottime) - (b.s.mono - a.s.mono)
    if suspended > GRACE_EXTRA_S:
        return start, end, "suspend", f"suspended for {suspended / 60:.1f} min"
    gaps = _seen_between(events, "gap", a.s, b.s, b.s.interval_s)
    if gaps:
        return start, end, NOT_RECORDED, str(gaps[0].detail.get("reason", "not written"))
    stops = _seen_between(events, "recorder_stop", a.s, b.s, 0.0)
    if stops:
        return start, end, NOT_RECORDED, f"the recorder was stopped ({stops[0].detail.get('reason', '?')})"
    return start, end, NOT_RECORDED, "the recorder was not running (killed or stalled)"


def segments_of(recording: Recording, now: float | None = None) -> list[Segment]:
    """The window as segments. ``now`` (calendar time): a recording still running covers no time
    after it."""
    placed = place(recording.samples)
    if not placed:  # a database created by a recorder that stopped before its first sample
        return []
    boots = {b.boot_id: b for b in recording.boots}
    out: list[Segment] = []
    shift = 0.0  # how far later boots move when two boots' wall clocks disagree
    for a, b in zip(placed, [*placed[1:], None], strict=True):
        a = Placed(a.at + shift, a.s)
        state, note = sample_state(a.s)
        limit = a.at + a.s.interval_s * GRACE + GRACE_EXTRA_S
        if b is None:
            end = _covered_until(a, None, recording.events)
            if now is not None and now >= a.at:  # (a clock behind the recording's cannot clip it)
                end = min(end, now)
            out.append(Segment(a.at, end, state, note))
            continue
        b = Placed(b.at + shift, b.s)
        if b.at <= limit and b.s.boot_id == a.s.boot_id:  # a new boot is a stop, however quick
            out.append(Segment(a.at, b.at, state, note))
            continue
        gap_start, gap_end, gap_state, gap_note = _gap_state(a, b, boots, recording.events)
        shift += gap_end - b.at
        gap_start = max(a.at, min(gap_start, gap_end))
        if gap_start > a.at:
            out.append(Segment(a.at, gap_start, state, note))
        out.append(Segment(gap_start, gap_end, gap_state, gap_note))
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


def gpu_health(recording: Recording) -> list[GpuHealth]:
    """Throttled time and ECC increases per GPU. The recorder stores each counter's increase
    since the previous sample (``th``, ``pw`` seconds; None where the two samples were not
    consecutive in one boot, so nothing from unrecorded time is counted)."""
    sums: dict[int, list[float]] = {}
    for s in recording.samples:
        for g in s.detail.get("gpus") or []:
            if not isinstance(g, dict) or not isinstance(g.get("i"), int):
                continue
            th, pw, span = g.get("th"), g.get("pw"), g.get("span")
            row = sums.setdefault(g["i"], [0.0, 0.0, 0.0])
            if isinstance(span, (int, float)) and isinstance(th, (int, float)):
                row[0] += th
                row[1] += pw if isinstance(pw, (int, float)) else 0.0
                row[2] += span
    ecc: dict[int, list[int]] = {}
    no_ecc: set[int] = set()
    for e in recording.events:
        if e.kind == "ecc" and isinstance(e.detail.get("gpu"), int):
            if e.detail.get("available") is False:
                no_ecc.add(e.detail["gpu"])
                continue
            row_e = ecc.setdefault(e.detail["gpu"], [0, 0])
            row_e[0] += int(e.detail.get("corrected_new") or 0)
            row_e[1] += int(e.detail.get("uncorrected_new") or 0)
    gpus = sorted(set(sums) | set(ecc))
    return [
        GpuHealth(i, round(sums.get(i, [0, 0, 0])[0], 3), round(sums.get(i, [0, 0, 0])[1], 3),
                  round(sums.get(i, [0, 0, 0])[2], 3), ecc.get(i, [0, 0])[0], ecc.get(i, [0, 0])[1],
                  i in ecc or i not in no_ecc)
        for i in gpus
    ]  # fmt: skip


def analyse(recording: Recording, now: float | None = None) -> Analysis:
    segments = segments_of(recording, now)
    anchors = boot_anchors(recording.samples)
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
    events = [place_event(e, anchors) for e in recording.events]
    return Analysis(
        segments=segments,
        window_start=segments[0].start if segments else None,
        window_end=segments[-1].end if segments else None,
        up_s=up,
        down_s=down,
        not_recorded_s=missing,
        outages=outages,
        events=events,
        boots=recording.boots,
        per_day=per_day,
        gpu_health=gpu_health(recording),
        drift=drift(events),
        interval_s=max((s.interval_s for s in recording.samples), default=None),
    )
