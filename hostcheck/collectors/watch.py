"""The reliability window from a `hostcheck watch` database, when there is one (read-only).

The database is opened read-only and never locked, so a running recorder is not disturbed.
No database is a real answer (``present: false`` with the path looked at), which the REL
checks turn into "unknown: run `hostcheck watch` for N days", never into a pass.

This records the recording's reduction (its up, down and not-recorded stretches, outages, boots,
GPU faults); no platform's rule is applied here. The REL checks apply them
(``hostcheck.watch.rules``), so a saved facts file is judged by today's rules.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from hostcheck.facts import Unknown
from hostcheck.recording.store import default_report_db

SECTION = "watch"
TIMEOUT = 5

OPTION = "--watch-db"  # what the audit's messages name as the way to pick another file
# How far back the evidence reaches: the longest window a platform's rule looks at (Runpod's;
# tests hold it to the rules' data). Older samples are not read.
EVIDENCE_DAYS = 30
MAX_SEGMENTS = 4096  # a 30-day recording with an outage every 20 minutes still fits


def _iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")


def summarise(path: Path) -> dict[str, Any]:
    from hostcheck.errors import WatchDbError
    from hostcheck.recording.analysis import analyse
    from hostcheck.recording.store import inspect_file, read_recording

    try:
        if not inspect_file(path, OPTION):
            return {"present": False, "path": str(path), "reason": f"no watch database at {path}"}
        recording = read_recording(path, since=time.time() - EVIDENCE_DAYS * 86400, option=OPTION)
    except WatchDbError as exc:
        return {"present": False, "path": str(path), "reason": str(exc)}
    a = analyse(recording)
    gpu_events = [e for e in a.events if e.kind in ("xid", "aer")]
    return {
        "present": True,
        "path": str(path),
        "reason": None,
        "window_start": _iso(a.window_start),
        "window_end": _iso(a.window_end),
        "observed_days": round(a.observed_s / 86400, 3),
        "not_recorded_days": round(a.not_recorded_s / 86400, 3),
        "uptime_pct": None if a.uptime is None else round(a.uptime * 100, 4),
        "segments": ([{"state": seg.state, "start": round(seg.start, 3), "end": round(seg.end, 3)} for seg in a.segments]
                     if len(a.segments) <= MAX_SEGMENTS
                     else Unknown(f"more than {MAX_SEGMENTS} stretches of up and down time in the window")),
        "current_up_h": round(a.current_up_s() / 3600, 2),
        "longest_up_h": round(a.longest_up_s() / 3600, 2),
        "outages": [{"cause": o.state, "start": _iso(o.start), "minutes": round(o.seconds / 60, 1)} for o in a.outages],
        "unclean_stops": sum(1 for o in a.outages if o.state == "power"),
        "gpu_faults": [
            {"kind": e.kind, "code": e.detail.get("code"), "severity": e.detail.get("severity"), "at": _iso(e.t),
             "needs_reboot": bool(e.detail.get("needs_reboot")), "hardware": bool(e.detail.get("hardware"))}
            for e in gpu_events if e.detail.get("needs_reboot") or e.detail.get("hardware")
        ][:50],
    }  # fmt: skip


def collect(ctx: Any) -> dict[str, Any]:
    path = getattr(ctx, "watch_db", None)
    return summarise(Path(path) if path else default_report_db())
