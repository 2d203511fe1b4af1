"""The README's example report comes from bench/watch_week.py, which drives the real recorder
through simulated time with outages injected. Here it runs for six simulated hours with each
kind of outage once: every outage it injected must come back from the report with its cause
and its length."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from bench.watch_week import INTERVAL_S, QUARTER_DAY, START, simulate
from tests.helpers import run_cli
from tests.watch_fixtures import JOURNAL_REMOTE


@pytest.mark.skipif(not JOURNAL_REMOTE.exists(), reason="systemd-journal-remote is not installed (scripts/test installs it)")
def test_six_simulated_hours_report_the_injected_outages(tmp_path: Path) -> None:
    db = tmp_path / "hours.db"
    injected = simulate(db, days=0.25, schedule=QUARTER_DAY)
    proc = run_cli("watch", "report", "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    got = [(o["cause"], o["start"], o["seconds"]) for o in report["outages"]]
    expected = []
    for i in injected:
        start = START + i.at_s
        if i.kind == "driver":
            # The GPU is out of service until the owner's 3-minute reboot ends the fault.
            expected += [("driver", start, i.minutes * 60 - 180), ("reboot", start + i.minutes * 60 - 180, 180.0)]
        else:
            expected.append((i.kind, start, i.minutes * 60))
    assert len(got) == len(expected), got
    for (cause, start_text, seconds), (kind, start, length) in zip(got, expected, strict=True):
        assert cause == kind
        assert abs(dt.datetime.fromisoformat(start_text + "+00:00").timestamp() - start) <= INTERVAL_S
        assert abs(seconds - length) <= INTERVAL_S  # within one sample interval
    # The six hours are fully observed: no time left out, and up time is the whole minus the outages.
    assert report["window"]["not_recorded_s"] == 0
    assert report["down_s"] == pytest.approx(sum(i.minutes * 60 for i in injected), abs=len(injected) * INTERVAL_S)
    events = {e["kind"] for e in report["events"]}
    assert {"xid", "package", "clock_jump"} <= events
    (xid,) = [e for e in report["events"] if e["kind"] == "xid"]
    assert xid["detail"]["code"] == 79 and xid["detail"]["immediate"] == "RESTART_BM"
