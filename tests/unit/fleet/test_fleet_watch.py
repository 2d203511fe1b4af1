"""`hostcheck fleet watch`: three hosts' real recordings (SQLite files written by the store,
read by `hostcheck watch report --format json`) side by side, worst first; a host without a
report and a file that is not one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hostcheck.recording.store import Boot, WatchWriter
from tests.unit.watch.test_watch import minutes


def _hostcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcheck.cli", *args], capture_output=True, text=True, timeout=60)


def _recording(db: Path, down_minutes: int, cause: str) -> None:
    """An hour a minute apart; ``down_minutes`` of them with every target failing (network), or
    a stop of that length between two boots with no shutdown record (power)."""
    start = time.time() - 7200
    with WatchWriter(db) as writer:
        if cause == "power":
            first = minutes(start, 30, boot="b1")
            second = minutes(start + 60 * (30 + down_minutes), 30, boot="b2", mono0=0.0)
            writer.put_boot(Boot("b1", start, None, False, "no shutdown record"))
            samples = first + [s.__class__(s.t, s.mono + 60, s.boottime + 60, s.boot_id, s.interval_s, s.net_ok, s.net_total,
                                           s.gpu_ok, s.detail) for s in second]
        else:
            samples = minutes(start, 60)
            samples = [s.__class__(s.t, s.mono, s.boottime, s.boot_id, s.interval_s, 0 if 20 <= i < 20 + down_minutes else 3,
                                   3, s.gpu_ok, s.detail) for i, s in enumerate(samples)]
        for s in samples:
            writer.add_sample(s)


def test_three_hosts_side_by_side_worst_first(tmp_path: Path) -> None:
    reports = tmp_path / "watch"
    reports.mkdir()
    hosts = {"rig-steady": (0, "network"), "rig-flaky": (5, "network"), "rig-cut": (15, "power")}
    for host, (down, cause) in hosts.items():
        _recording(tmp_path / f"{host}.db", down, cause)
        proc = _hostcheck("watch", "report", "--db", str(tmp_path / f"{host}.db"), "--format", "json")
        assert proc.returncode == 0, proc.stderr
        (reports / f"{host}.watch.json").write_text(proc.stdout)
    (reports / "rig-gone.watch.json").write_text(json.dumps({"unavailable": "unreachable: ssh timed out"}))
    proc = _hostcheck("fleet", "watch", str(reports), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)["hosts"]
    # The rule: no report first; then the lowest uptime (down minutes over observed minutes).
    def uptime(down: int, cause: str) -> float:
        observed = 60 if cause == "network" else 60 + down
        return (observed - down) / observed
    expected = ["rig-gone"] + sorted(hosts, key=lambda h: uptime(*hosts[h]))
    assert [r["host"] for r in rows] == expected
    by_host = {r["host"]: r for r in rows}
    for host, (down, cause) in hosts.items():
        row = by_host[host]
        assert row["uptime"] == uptime(down, cause), host
        assert row["outages"] == ({cause: 1} if down else {}), host
        assert row["down_minutes"] == ({cause: float(down)} if down else {}), host
        assert set(row["platforms"]) == {"runpod", "vast", "ionet"}
    assert by_host["rig-gone"]["readable"] is False and "ssh timed out" in by_host["rig-gone"]["reason"]
    text = _hostcheck("fleet", "watch", str(reports)).stdout
    assert text.splitlines()[0].split()[:3] == ["host", "uptime", "days"]
    assert "power 1" in text and "network 1" in text


def test_a_file_that_is_not_a_watch_report_is_its_hosts_row_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "evil.watch.json").write_text(json.dumps({"window": "\x1b[31mred", "outages": [], "platforms": []}))
    (tmp_path / "audit.json").write_text("{}")  # an audit report next to them is not read
    proc = _hostcheck("fleet", "watch", str(tmp_path), "--format", "json")
    assert proc.returncode == 2, proc.stderr
    rows = json.loads(proc.stdout)["hosts"]
    assert [r["host"] for r in rows] == ["evil"] and rows[0]["readable"] is False
    assert "not a `hostcheck watch report" in proc.stderr
