"""`hostcheck watch`: the store on real SQLite files, probes against real local sockets, the
journal through real journal files (written by systemd-journal-remote, read by journalctl),
and the report's arithmetic against rules written out here."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.errors import WatchDbError
from hostcheck.models import Finding, Report
from hostcheck.recording.analysis import analyse
from hostcheck.recording.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Boot,
    Event,
    Recording,
    Sample,
    WatchWriter,
    read_recording,
)
from hostcheck.render.watch import timeline
from hostcheck.watch import pkglog
from hostcheck.watch.probes import DEFAULT_TARGETS, NetworkProber, answered, parse_target, parse_targets
from hostcheck.watch.recorder import Clocks, Recorder, WatchConfig
from hostcheck.watch.rules import rules, score_all
from hostcheck.watch.xid import classify_line
from tests.helpers import run_cli
from tests.nvml_standin import FakeNvml, laptop_3080ti
from tests.watch_fixtures import render_watch

JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")
REPO = Path(__file__).resolve().parents[3]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ local network targets


@pytest.fixture
def tcp_listener() -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    srv.close()


@pytest.fixture
def dns_server() -> Iterator[int]:
    """A UDP responder that answers every query with a header-only NOERROR reply."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(512)
            except OSError:
                continue
            if len(data) >= 12:
                sock.sendto(data[:2] + struct.pack("!HHHHH", 0x8180, 1, 0, 0, 0) + data[12:], peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join()
    sock.close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_probes_real_sockets(tcp_listener: int, dns_server: int) -> None:
    # Bound UDP sockets that never answer: dead resolvers (no traffic leaves loopback).
    silent = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
    for sock in silent:
        sock.bind(("127.0.0.1", 0))
    dead = [f"dns:127.0.0.1:{sock.getsockname()[1]}" for sock in silent]
    targets = parse_targets([f"tcp:127.0.0.1:{tcp_listener}", f"dns:127.0.0.1:{dns_server}", *dead])
    prober = NetworkProber(targets, timeout=0.5)
    try:
        started = time.monotonic()
        results = prober.sample()
        took = time.monotonic() - started
    finally:
        prober.close()
        for sock in silent:
            sock.close()
    assert results[f"tcp:127.0.0.1:{tcp_listener}"] == "ok"
    assert results[f"dns:127.0.0.1:{dns_server}"] == "ok"
    assert all(results[d] == "timeout" for d in dead)
    assert took < 1.5  # side by side, each within its timeout (one after another: at least 2 s)
    assert answered(results) == 2  # four dead targets of six: the network is still up


def test_refused_connection_counts_as_an_answer() -> None:
    port = closed_port()
    prober = NetworkProber(parse_targets([f"tcp:127.0.0.1:{port}"]), timeout=0.5)
    try:
        assert prober.sample() == {f"tcp:127.0.0.1:{port}": "refused"}
    finally:
        prober.close()


@pytest.mark.parametrize("spec", ["udp:1.1.1.1:53", "tcp:1.1.1.1", "tcp::443", "dns:1.1.1.1:99999", "tcp:[::1:443"])
def test_bad_targets_are_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_target(spec)


def test_default_targets_are_three_operators_two_ways() -> None:
    targets = parse_targets(list(DEFAULT_TARGETS))
    assert {t.host for t in targets} == {"1.1.1.1", "8.8.8.8", "9.9.9.9"}
    assert {t.kind for t in targets} == {"tcp", "dns"}


# ------------------------------------------------------------------ the store


def sample(t: float, boot: str = "b1", ok: int = 3, interval: float = 60.0, gpu: bool | None = None, mono: float | None = None,
           boottime: float | None = None) -> Sample:
    mono = t if mono is None else mono
    return Sample(t, mono, mono if boottime is None else boottime, boot, interval, ok, 3, gpu, {})


def test_store_round_trip_and_identity(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with WatchWriter(db) as w:
        w.add_sample(sample(1000.0))
        w.add_event(Event(1000.0, "xid", "b1", {"code": 79}))
        w.put_boot(Boot("b1", 900.0, None, None, "current"))
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    rec = read_recording(db)
    assert [s.t for s in rec.samples] == [1000.0] and rec.events[0].detail == {"code": 79}
    with WatchWriter(db) as w:  # reopening appends, never recreates
        w.add_sample(sample(1060.0))
    assert len(read_recording(db).samples) == 2


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with WatchWriter(db), pytest.raises(WatchDbError, match="one writer at a time"):
        WatchWriter(db)


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = digest(db)
    with pytest.raises(WatchDbError, match="another application"):
        WatchWriter(db)
    with pytest.raises(WatchDbError, match="another application"):
        read_recording(db)
    assert digest(db) == before


def test_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("my notes\n")
    with pytest.raises(WatchDbError, match="not an SQLite database"):
        WatchWriter(db)
    assert db.read_text() == "my notes\n"


def test_damaged_database_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with WatchWriter(db) as w:
        for i in range(400):
            w.add_sample(sample(1000.0 + i))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    page = 4096
    data[2 * page : 4 * page] = b"\xa5" * (2 * page)  # scribble over two b-tree pages, keep the header
    db.write_bytes(bytes(data))
    before = digest(db)
    with pytest.raises(WatchDbError, match="damaged"):
        WatchWriter(db)
    assert digest(db) == before


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    WatchWriter(db).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(WatchDbError, match="newer hostcheck"):
        WatchWriter(db)


# ------------------------------------------------------------------ the recorder


class StepClocks(Clocks):
    """Clocks a test can move: a suspend moves wall and boottime but not monotonic."""

    def __init__(self) -> None:
        self.w, self.m, self.b = 1_800_000_000.0, 100.0, 100.0
        super().__init__(wall=lambda: self.w, mono=lambda: self.m, boottime=lambda: self.b)

    def advance(self, seconds: float, suspended: float = 0.0, step: float = 0.0) -> None:
        self.w += seconds + suspended + step
        self.m += seconds
        self.b += seconds + suspended


def recorder(tmp_path: Path, clocks: Clocks, targets: list[str], **kw: Any) -> Recorder:
    boot_id = tmp_path / "boot_id"
    if not boot_id.exists():
        boot_id.write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    config = WatchConfig(db=tmp_path / "w.db", interval_s=60, targets=targets, probe_timeout_s=0.3,
                         journal_command=kw.pop("journal_command", ["journalctl", "--file", str(tmp_path / "none.journal")]),
                         dpkg_log=kw.pop("dpkg_log", tmp_path / "dpkg.log"), nvml=kw.pop("nvml", FakeNvml([laptop_3080ti()])),
                         boot_id_path=boot_id, container_mark=tmp_path / "no-container-mark", **kw)
    return Recorder(config, clocks=clocks, log=lambda _m: None)


def test_clock_jump_and_suspend_are_recorded(tmp_path: Path, tcp_listener: int) -> None:
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, [f"tcp:127.0.0.1:{tcp_listener}"])
    rec.step()
    clocks.advance(60)
    rec.step()
    clocks.advance(60, step=-3600)  # NTP stepped the clock back an hour
    rec.step()
    clocks.advance(60, suspended=1800)  # suspended for 30 minutes
    rec.step()
    rec.writer.close()
    events = {e.kind: e.detail for e in read_recording(tmp_path / "w.db").events}
    assert events["clock_jump"]["step_s"] == -3600
    assert events["suspend"]["seconds"] == 1800
    analysis = analyse(read_recording(tmp_path / "w.db"))
    assert [o.state for o in analysis.outages] == ["suspend"]


def test_full_disk_is_a_gap_and_nothing_written_is_lost(tmp_path: Path, tcp_listener: int) -> None:
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, [f"tcp:127.0.0.1:{tcp_listener}"])
    for _ in range(3):
        rec.step()
        clocks.advance(60)
    # SQLite's own page limit makes every further write fail with SQLITE_FULL, as a full disk does.
    pages = rec.writer.conn.execute("PRAGMA page_count").fetchone()[0]
    rec.writer.conn.execute(f"PRAGMA max_page_count={pages}")
    filler = 0
    while True:  # fill what room is left, so that the next sample does not fit
        try:
            rec.writer.add_sample(Sample(clocks.w, clocks.m, clocks.b, rec.boot_id, 60, 1, 1, None, {"pad": "x" * 500}))
            filler += 1
        except sqlite3.OperationalError as exc:
            assert "full" in str(exc)
            break
    for _ in range(4):
        rec.step()  # must not raise
        clocks.advance(60)
    assert len(rec.unwritten) >= 4 and "full" in rec.unwritten[0][1]
    rec.writer.conn.execute("PRAGMA max_page_count=1000000")
    rec.step()
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    assert len(recording.samples) == 3 + filler + 1  # everything before the disk filled, and the one after
    gaps = [e for e in recording.events if e.kind == "gap"]
    assert len(gaps) == 1 and gaps[0].detail["lost_samples"] >= 4 and "full" in gaps[0].detail["reason"]
    not_recorded = [s for s in analyse(recording).segments if s.state == "not recorded"]
    assert len(not_recorded) == 1 and "full" in not_recorded[0].note


def test_unreadable_journal_is_recorded_and_recording_goes_on(tmp_path: Path, tcp_listener: int) -> None:
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, [f"tcp:127.0.0.1:{tcp_listener}"], journal_command=["/nonexistent/journalctl"])
    rec.step()
    clocks.advance(60)
    rec.step()
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    journal = [e for e in recording.events if e.kind == "journal"]
    assert len(journal) == 1 and journal[0].detail["readable"] is False  # once, not every interval
    assert len(recording.samples) == 2


def test_lost_gpu_is_a_driver_outage(tmp_path: Path, tcp_listener: int) -> None:
    clocks = StepClocks()
    card = laptop_3080ti()
    fake = FakeNvml([card])
    rec = recorder(tmp_path, clocks, [f"tcp:127.0.0.1:{tcp_listener}"], nvml=fake)
    for lost in (False, False, True, True, False):
        fake.lost = {0} if lost else set()
        rec.step()
        clocks.advance(60)
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    assert [s.gpu_ok for s in recording.samples] == [True, True, False, False, True]
    outages = analyse(recording).outages
    assert [(o.state, o.seconds) for o in outages] == [("driver", 120.0)]
    throttle = [e.detail for e in recording.events if e.kind == "throttle"]
    assert throttle[0] == {"gpu": 0, "reasons": ["hw_thermal_slowdown", "sw_power_cap"]}


def test_package_changes_from_dpkg_log(tmp_path: Path) -> None:
    log = tmp_path / "dpkg.log"
    log.write_text(
        "2026-11-30 10:11:12 upgrade nvidia-driver-550:amd64 550.54.14-0ubuntu1 550.90.07-0ubuntu1\n"
        "2026-11-30 10:11:13 status installed nvidia-driver-550:amd64 550.90.07-0ubuntu1\n"
        "2026-11-30 10:12:00 upgrade vim:amd64 2:9.0 2:9.1\n"
        "2026-11-30 10:13:00 install linux-image-6.8.0-50-generic:amd64 <none> 6.8.0-50.51\n"
        "2026-11-30 10:14:00 upgrade docker-ce:amd64 5:27.1 5:27.3\n"
        "2026-11-30 10:15:00 upgrade containerd.io:amd64 1.7.1 1.7"  # half-written: read next time
    )
    changes, position, problem = pkglog.read_new(log, None)
    assert problem is None
    assert [(c.action, c.package, c.new) for c in changes] == [
        ("upgrade", "nvidia-driver-550", "550.90.07-0ubuntu1"),
        ("install", "linux-image-6.8.0-50-generic", "6.8.0-50.51"),
        ("upgrade", "docker-ce", "5:27.3"),
    ]
    with log.open("a") as fh:
        fh.write(".2\n")
    more, _, _ = pkglog.read_new(log, position)
    assert [(c.package, c.new) for c in more] == [("containerd.io", "1.7.2")]


# ------------------------------------------------------------------ a real journal file


def journal_export(entries: list[dict[str, str]]) -> bytes:
    out = []
    for e in entries:
        out.append("".join(f"{k}={v}\n" for k, v in e.items()) + "\n")
    return "".join(out).encode()


def make_journal(tmp_path: Path, entries: list[dict[str, str]]) -> Path:
    if not JOURNAL_REMOTE.exists():
        pytest.skip("systemd-journal-remote is not installed (scripts/test installs it)")
    path = tmp_path / "lab.journal"
    subprocess.run([str(JOURNAL_REMOTE), "-o", str(path), "-"], input=journal_export(entries), check=True,
                   capture_output=True, timeout=30)
    return path


def entry(boot: str, t: float, message: str, transport: str = "kernel", **extra: str) -> dict[str, str]:
    usec = int(t * 1e6)
    return {"__REALTIME_TIMESTAMP": str(usec), "__MONOTONIC_TIMESTAMP": str(usec % 10**9), "_BOOT_ID": boot,
            "_TRANSPORT": transport, "MESSAGE": message, "PRIORITY": "3", "_HOSTNAME": "lab", **extra}


def test_journal_boots_clean_and_unclean_and_kernel_lines(tmp_path: Path, tcp_listener: int) -> None:
    now = time.time()
    b1, b2, b3 = "1" * 32, "2" * 32, "a" * 32
    journal = make_journal(tmp_path, [
        entry(b1, now - 7200, "Linux version 6.1.0"),
        entry(b1, now - 7100, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        entry(b1, now - 7000, "Journal stopped", transport="driver", MESSAGE_ID="d93fb3c9c24d451a97cea615ce59c00b"),
        entry(b2, now - 6000, "Linux version 6.1.0"),
        entry(b2, now - 5000, "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"),  # then power lost
        entry(b3, now - 1000, "Linux version 6.1.0"),
    ])  # fmt: skip
    (tmp_path / "boot_id").write_text("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa\n")
    clocks = Clocks()
    rec = recorder(tmp_path, clocks, [f"tcp:127.0.0.1:{tcp_listener}"], journal_command=["journalctl", "--file", str(journal)])
    rec._sync_boots()
    rec.step()
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    boots = {b.boot_id: b for b in recording.boots}
    assert boots[b1].clean is True and "Journal stopped" in boots[b1].evidence
    assert boots[b2].clean is False and "no shutdown record" in boots[b2].evidence
    assert boots[b3].clean is None  # the running boot has not ended
    kinds = [(e.kind, e.detail.get("code") or e.detail.get("severity")) for e in recording.events if e.kind in ("xid", "aer")]
    assert kinds == [("xid", 79), ("aer", "corrected")]
    # The Xid 79 was in an earlier boot: it does not take this boot's GPU out of service.
    assert rec.gpu_out_of_service is None


# ------------------------------------------------------------------ analysis and platform rules


def recording_of(samples: list[Sample], boots: list[Boot] | None = None, events: list[Event] | None = None) -> Recording:
    return Recording("test.db", samples, events or [], boots or [], {})


def minutes(start: float, count: int, boot: str = "b1", ok: int = 3, mono0: float = 0.0) -> list[Sample]:
    return [sample(start + 60 * i, boot=boot, ok=ok, mono=mono0 + 60 * i) for i in range(count)]


T0 = 1_800_000_000.0 - 1_800_000_000.0 % 86400  # a UTC midnight


def test_network_outage_length_and_one_dead_target() -> None:
    # 60 minutes up, 7 minutes with every target failing, 53 up; one target of three dead throughout.
    samples = minutes(T0, 60, ok=2) + minutes(T0 + 3600, 7, ok=0, mono0=3600) + minutes(T0 + 4020, 53, ok=2, mono0=4020)
    a = analyse(recording_of(samples))
    assert [(o.state, o.seconds) for o in a.outages] == [("network", 7 * 60.0)]
    assert a.up_s == 113 * 60.0 and a.down_s == 7 * 60.0
    assert a.uptime == pytest.approx(113 / 120)


def test_reboot_and_power_cut_are_told_apart() -> None:
    boots = [Boot("b1", T0 - 100, T0 + 600 + 30, True, "shutdown record in the journal: 'Journal stopped'"),
             Boot("b2", T0 + 900, T0 + 1800 + 10, False, "no shutdown record in the last 60 journal entries of the boot"),
             Boot("b3", T0 + 2400, None, None, "current boot")]
    samples = minutes(T0, 11, boot="b1") + minutes(T0 + 960, 15, boot="b2") + minutes(T0 + 2460, 10, boot="b3")
    a = analyse(recording_of(samples, boots))
    # b1's last sample at T0+600 covers to +630 where the journal saw it end; b2 starts sampling at +960.
    # b2's last sample at T0+1800 covers to +1810 (journal end); b3 samples from +2460.
    assert [(o.state, o.start - T0, o.end - T0) for o in a.outages] == [("reboot", 630, 960), ("power", 1810, 2460)]


def test_stopped_recorder_is_left_out_of_the_window() -> None:
    events = [Event(T0 + 600 + 5, "recorder_stop", "b1", {"reason": "SIGTERM"})]
    samples = minutes(T0, 11) + minutes(T0 + 3600, 10, mono0=3600)
    a = analyse(recording_of(samples, events=events))
    assert a.outages == [] and a.uptime == 1.0
    # The last sample (+600) covers time only until the recorder stopped 5 s later, not its
    # whole minute: not recorded from +605 to the next sample at +3600.
    assert a.not_recorded_s == 3600 - 605
    assert "stopped (SIGTERM)" in [s for s in a.segments if s.state == "not recorded"][0].note


RUNPOD_WINDOW_MIN = 30 * 1440  # Runpod's rolling window: 43,200 minutes
RUNPOD_BUFFER_MIN = 10


def runpod_of(samples: list[Sample]) -> Any:
    return next(s for s in score_all(analyse(recording_of(samples))) if s.rule_id == "runpod")


def test_runpod_formula_over_its_30_day_window() -> None:
    # 30 days at one sample a minute, 30 minutes down: the source's own example,
    # (43200 - 30 + 10) / 43200 = 99.95 %.
    samples = minutes(T0, 20000) + minutes(T0 + 20000 * 60, 30, ok=0, mono0=20000 * 60) + \
        minutes(T0 + 20030 * 60, RUNPOD_WINDOW_MIN - 20030, mono0=20030 * 60)
    runpod = runpod_of(samples)
    assert runpod.score == pytest.approx((RUNPOD_WINDOW_MIN - 30 + RUNPOD_BUFFER_MIN) / RUNPOD_WINDOW_MIN)
    assert runpod.verdict == "meets"
    # 900 minutes down in the 30 days: (43200 - 900 + 10) / 43200 = 97.94 % < 98 %.
    samples = minutes(T0, 20000) + minutes(T0 + 20000 * 60, 900, ok=0, mono0=20000 * 60) + \
        minutes(T0 + 20900 * 60, RUNPOD_WINDOW_MIN - 20900, mono0=20900 * 60)
    runpod = runpod_of(samples)
    assert runpod.score == pytest.approx((RUNPOD_WINDOW_MIN - 900 + RUNPOD_BUFFER_MIN) / RUNPOD_WINDOW_MIN)
    assert runpod.verdict == "below"


def test_runpod_on_a_short_window_is_not_enough_data() -> None:
    # One day at 71 % uptime (418 minutes down): the buffer over one day would read
    # (1022 + 10) / 1440 = 71.7 %, and over 43,200 minutes the source's formula cannot be
    # applied to 1,440. Not enough data; the best the 30 days can still reach is
    # (43200 - 418 + 10) / 43200 = 99.06 % (>= 98 %), so no verdict yet.
    samples = minutes(T0, 700) + minutes(T0 + 700 * 60, 418, ok=0, mono0=700 * 60) + \
        minutes(T0 + 1118 * 60, 322, mono0=1118 * 60)
    runpod = runpod_of(samples)
    assert runpod.verdict == "unknown" and runpod.score is None
    assert "not enough data: 1.0 of 30 days" in runpod.summary
    assert runpod.numbers["best_pct"] == pytest.approx((RUNPOD_WINDOW_MIN - 418 + RUNPOD_BUFFER_MIN) / RUNPOD_WINDOW_MIN * 100, abs=1e-3)
    # The rate so far extended to 30 days (an extrapolation): 418 of 1440 minutes down.
    at_rate = (RUNPOD_WINDOW_MIN - 418 / 1440 * RUNPOD_WINDOW_MIN + RUNPOD_BUFFER_MIN) / RUNPOD_WINDOW_MIN
    assert runpod.numbers["at_rate_pct"] == pytest.approx(at_rate * 100, abs=1e-3)


def test_runpod_short_window_already_below_whatever_follows() -> None:
    # Two days with 900 minutes down: any 30-day window holding them scores at most
    # (43200 - 900 + 10) / 43200 = 97.94 % < 98 %: "below" now, with that bound as the score.
    samples = minutes(T0, 1000) + minutes(T0 + 1000 * 60, 900, ok=0, mono0=1000 * 60) + \
        minutes(T0 + 1900 * 60, 980, mono0=1900 * 60)
    runpod = runpod_of(samples)
    assert runpod.verdict == "below"
    assert runpod.score == pytest.approx((RUNPOD_WINDOW_MIN - 900 + RUNPOD_BUFFER_MIN) / RUNPOD_WINDOW_MIN)


VAST_MIN_S = 86400.0  # hostcheck compares with Vast's levels from one day of samples (platform_rules.yaml)


def vast_of(samples: list[Sample], events: list[Event] | None = None) -> Any:
    return next(s for s in score_all(analyse(recording_of(samples, events=events))) if s.rule_id == "vast")


def test_vast_levels_and_ionet_continuous_hand_computed() -> None:
    # 20 h up, 1 h network down, 5.5 h up: 26.5 h observed (over the day Vast's levels need),
    # uptime 25.5/26.5 = 0.962 (>= 90 %, < 99.99 %); io.net: the current run is 5.5 h > 5 h;
    # longest 20 h; one outage reset the count.
    samples = minutes(T0, 1200) + minutes(T0 + 72000, 60, ok=0, mono0=72000) + minutes(T0 + 75600, 330, mono0=75600)
    scores = {s.rule_id: s for s in score_all(analyse(recording_of(samples)))}
    assert scores["vast"].score == pytest.approx(25.5 / 26.5) and scores["vast"].verdict == "meets"
    assert "below the favoured 99.99 %" in scores["vast"].summary
    assert scores["ionet"].numbers == {"current_up_h": 5.5, "longest_up_h": 20.0, "resets": 1}
    assert scores["ionet"].verdict == "meets"


def test_vast_never_meets_on_less_than_its_minimum() -> None:
    # One sample and the recorder's stop 0.45 s later: 0.45 s observed, not the sample's minute;
    # 100 % uptime, and still no verdict: far under the day hostcheck needs.
    one = [sample(T0, boot="b1", ok=3, mono=0.0)]
    stop = Event(T0 + 0.45, "recorder_stop", "b1", {"reason": "duration reached"}, one[0].boottime + 0.45)
    a = analyse(recording_of(one, events=[stop]))
    assert a.observed_s == pytest.approx(0.45) and a.uptime == 1.0
    vast = vast_of(one, [stop])
    assert vast.verdict == "unknown" and vast.summary.startswith("not enough data")
    # 23 h 59 min at 100 %: still under a day.
    assert vast_of(minutes(T0, 1439)).verdict == "unknown"
    # Two days at 100 %, a sample a minute: verification's 90 % is met; the favoured 99.99 % is
    # not claimed: a one-minute outage between samples goes unseen, and only after
    # 60 / (1 - 0.9999) s = 600,000 s (6.9 days) would one such outage take it below 99.99 %.
    two_days = vast_of(minutes(T0, 2 * 1440))
    assert two_days.verdict == "meets" and "above verification's 90 %" in two_days.summary
    assert "at or above the favoured" not in two_days.summary and "6.9 days" in two_days.summary
    week = vast_of(minutes(T0, 7 * 1440))  # 604,800 s >= 600,000 s
    assert week.verdict == "meets" and "at or above the favoured 99.99 %" in week.summary


def test_one_sample_report_says_the_time_it_covered() -> None:
    one = [sample(T0, boot="b1", ok=3, mono=0.0)]
    stop = Event(T0 + 0.45, "recorder_stop", "b1", {"reason": "duration reached"}, one[0].boottime + 0.45)
    a = analyse(recording_of(one, events=[stop]))
    text = render_watch(a, score_all(a), "test.db", "table")
    assert "0.45s observed" in text and "1m00s observed" not in text


def test_rules_carry_sources_dates_and_status() -> None:
    r = rules()
    assert "2026-04-01" in r["runpod"]["status"] and "2026-02-25" in r["runpod"]["status"]
    assert r["vast"]["start"] == 0.60 and r["vast"]["verification"] == 0.90 and "disagree" in r["vast"]["disagreement"]
    assert r["ionet"]["min_hours"] == 5
    # Vast publishes no window: the minimum hostcheck follows is data, with why, and never under a day.
    assert r["vast"]["min_days"] >= 1 and "24 h" in r["vast"]["applied"] and "publishes no window" in r["vast"]["applied"]
    assert all(rule["sources"] for rule in r.values())


def test_report_formats_and_timeline() -> None:
    samples = minutes(T0, 60) + minutes(T0 + 3600, 30, ok=0, mono0=3600) + minutes(T0 + 5400, 30, mono0=5400)
    a = analyse(recording_of(samples))
    chart = timeline(a)
    # Under a day of window: one row per hour, one cell per minute. 00:00-01:00 up,
    # 01:00-01:30 network, 01:30-02:00 up.
    day = time.strftime("%Y-%m-%d", time.gmtime(T0))
    assert chart[1:] == [f"{day} 00:00 |" + "=" * 60 + "|", f"{day} 01:00 |" + "N" * 30 + "=" * 30 + "|"]
    # A week: one row per day, 30 minutes a cell; the 30-minute outage fills one cell.
    week = minutes(T0, 60) + minutes(T0 + 3600, 30, ok=0, mono0=3600) + minutes(T0 + 5400, 7 * 1440 - 90, mono0=5400)
    rows = timeline(analyse(recording_of(week)))
    assert len(rows) == 1 + 7 and rows[1] == f"{day} |==N" + "=" * 45 + "|"
    md = render_watch(a, score_all(a), "x.db", "markdown")
    assert "| network |" in md.replace("  ", " ") or "network" in md
    assert "```" in md and "Runpod" in md

    data = json.loads(render_watch(a, score_all(a), "x.db", "json"))
    assert data["outages"][0]["cause"] == "network" and data["outages"][0]["seconds"] == 1800


# ------------------------------------------------------------------ the command line


def hostcheck(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostcheck.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def test_cli_refuses_a_foreign_file_with_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("not a database")
    for args in (["watch", "--db", str(db), "--for", "60"], ["watch", "report", "--db", str(db)]):
        proc = hostcheck(*args)
        assert proc.returncode == 2 and "not an SQLite database" in proc.stderr
    assert db.read_text() == "not a database"
    proc = hostcheck("watch", "report", "--db", str(tmp_path / "missing.db"))
    assert proc.returncode == 2 and "run" not in proc.stdout and "hostcheck watch --db" in proc.stderr


def test_cli_records_and_reports(tmp_path: Path, tcp_listener: int) -> None:
    db = tmp_path / "w.db"
    proc = hostcheck("watch", "--db", str(db), "--interval", "0.2", "--for", "1", "--target", f"tcp:127.0.0.1:{tcp_listener}",
                     "--journal-file", str(tmp_path / "none.journal"), "--allow-more-traffic")
    assert proc.returncode == 0, proc.stderr
    assert len(read_recording(db).samples) >= 4
    proc = hostcheck("watch", "report", "--db", str(db), "--format", "json")
    assert proc.returncode == 0 and '"uptime": 1.0' in proc.stdout


def test_report_on_a_database_with_no_sample_yet(tmp_path: Path) -> None:
    """A recorder stopped between creating its database and its first sample: every format
    says nothing was recorded, none crashes."""
    db = tmp_path / "w.db"
    with WatchWriter(db):
        pass
    assert read_recording(db).samples == []
    for fmt in ("table", "json", "markdown", "html"):
        proc = hostcheck("watch", "report", "--db", str(db), "--format", fmt)
        assert proc.returncode == 0, (fmt, proc.stderr)
        if fmt != "json":
            assert "No sample recorded yet" in proc.stdout or "no sample recorded yet" in proc.stdout, fmt
    assert '"uptime": null' in hostcheck("watch", "report", "--db", str(db), "--format", "json").stdout


def _wait_for_schema(db: Path, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if db.exists():
            conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
            try:
                conn.execute("SELECT count(*) FROM samples")
                return
            except sqlite3.OperationalError:
                pass
            finally:
                conn.close()
        time.sleep(0.05)
    raise AssertionError(f"the recorder wrote no schema to {db} within {limit_s:g} s")


def test_sigkill_mid_write_keeps_every_committed_sample(tmp_path: Path, tcp_listener: int) -> None:
    """Kill the recorder with SIGKILL at random moments, again and again: the file must open,
    pass integrity_check, and hold at least every sample a reader saw committed before the kill."""
    import random

    db = tmp_path / "w.db"
    rng = random.Random(26)
    committed = 0
    for _ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-m", "hostcheck.cli", "watch", "--db", str(db), "--interval", "0.01", "--allow-more-traffic",
             "--target", f"tcp:127.0.0.1:{tcp_listener}", "--journal-file", str(tmp_path / "none.journal")],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_for_schema(db)  # a loaded machine can take seconds to start Python
        time.sleep(rng.uniform(0.2, 1.0))
        if db.exists():
            conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
            try:
                committed = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
            except sqlite3.OperationalError:
                pass
            conn.close()
        proc.kill()
        proc.wait(timeout=10)
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        after = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
        conn.close()
        assert after >= committed
    assert committed > 8  # the loop really recorded between kills
    assert len(read_recording(db).samples) >= committed
    assert shutil.which("journalctl") is not None


# ------------------------------------------------------------------ the audit reads the recording


def write_recording(db: Path, samples: list[Sample], boots: list[Boot] | None = None, events: list[Event] | None = None) -> None:
    with WatchWriter(db) as w:
        for s in samples:
            w.add_sample(s)
        for b in boots or []:
            w.put_boot(b)
        for e in events or []:
            w.add_event(e)


def rel_findings(report: Report, policy: str) -> dict[str, Finding]:
    result = next(p for p in report.policies if p.id == policy)
    return {f.id: f for f in result.findings if f.id.startswith("REL-")}


def test_audit_judges_uptime_from_the_recording(tmp_path: Path) -> None:
    from hostcheck.collectors.watch import summarise
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.report import build_report

    db = tmp_path / "w.db"
    # Two days at one sample a minute with one 50-minute network outage and an Xid 79.
    total = 2 * 1440
    samples = minutes(T0, 1000) + minutes(T0 + 60000, 50, ok=0, mono0=60000) + minutes(T0 + 63000, total - 1050, mono0=63000)
    xid = classify_line("NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    assert xid is not None
    xid.pop("kind")
    write_recording(db, samples, events=[Event(T0 + 5000, "xid", "b1", xid)])
    facts = load_snapshot(REPO / "tests" / "snapshots" / "dedicated-4090.json")
    facts["watch"] = summarise(db)
    report = build_report(facts, resolve_policies(["vast", "vast-verified", "runpod", "ionet"]))
    vast, verified = rel_findings(report, "vast"), rel_findings(report, "vast-verified")
    runpod, ionet = rel_findings(report, "runpod"), rel_findings(report, "ionet")
    uptime_pct = (total - 50) / total * 100  # 98.26 %
    assert vast["REL-1010"].status == "pass" and vast["REL-1010"].measured == pytest.approx(uptime_pct, abs=1e-3)
    assert "2.0 days observed" in vast["REL-1010"].detail or "(2 days observed)" in vast["REL-1010"].detail
    assert verified["REL-1010"].status != "pass"  # 98.26 % < 99.99 %
    assert vast["REL-1050"].status != "pass" and "Xid 79" in vast["REL-1050"].detail
    # Runpod's formula needs its 30 days: two days are not enough data, with the best the
    # 30 days can still reach, (43200 - 50 + 10) / 43200.
    assert runpod["REL-1020"].status == "unknown"
    assert "not enough data: 2 of 30 days" in runpod["REL-1020"].detail
    assert runpod["REL-1020"].measured == pytest.approx((43200 - 50 + 10) / 43200 * 100, abs=1e-3)
    # io.net: the current run is the last 2880-1050 = 1830 minutes = 30.5 h > 5 h.
    assert ionet["REL-1030"].status == "pass" and ionet["REL-1030"].measured == 30.5


def test_audit_runpod_below_before_30_days_when_the_downtime_settles_it(tmp_path: Path) -> None:
    from hostcheck.collectors.watch import summarise
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.report import build_report

    # Two days with 900 minutes down: (43200 - 900 + 10) / 43200 = 97.94 % at best, under 98 %.
    db = tmp_path / "w.db"
    write_recording(db, minutes(T0, 1000) + minutes(T0 + 60000, 900, ok=0, mono0=60000) + minutes(T0 + 114000, 980, mono0=114000))
    facts = load_snapshot(REPO / "tests" / "snapshots" / "dedicated-4090.json")
    facts["watch"] = summarise(db)
    report = build_report(facts, resolve_policies(["runpod"]))
    finding = rel_findings(report, "runpod")["REL-1020"]
    assert finding.status == "warn"  # failed; Runpod withdrew the rule, so it is a risk, not a blocker
    assert finding.measured == pytest.approx((43200 - 900 + 10) / 43200 * 100, abs=1e-3)


def test_saved_facts_are_rejudged_with_todays_reliability_rule(tmp_path: Path) -> None:
    """The watch collector records the recording's stretches, not a score: a saved facts file
    judged with a changed Runpod threshold gets the changed rule."""
    from hostcheck.collectors.watch import summarise
    from hostcheck.facts import load_snapshot, to_jsonable
    from hostcheck.policy import parse_policy
    from hostcheck.report import build_report

    db = tmp_path / "w.db"
    write_recording(db, minutes(T0, 1000) + minutes(T0 + 60000, 900, ok=0, mono0=60000) + minutes(T0 + 114000, 980, mono0=114000))
    facts = load_snapshot(REPO / "tests" / "snapshots" / "dedicated-4090.json")
    facts["watch"] = summarise(db)
    saved = tmp_path / "facts.json"
    saved.write_text(json.dumps(to_jsonable(facts)), encoding="utf-8")
    assert "runpod" not in json.dumps(facts["watch"])  # no platform's verdict is frozen into the facts
    text = (REPO / "policies" / "runpod.yaml").read_text(encoding="utf-8")
    rule = "{check: REL-1020, severity: risk, threshold: 98,"
    assert text.count(rule) == 1
    best = (43200 - 900 + 10) / 43200 * 100  # 97.94 %: the best any 30-day window holding 900 min down reaches
    for threshold, status in ((98, "warn"), (97, "unknown")):  # under 98 % settles it; over 97 % does not yet
        policy = parse_policy(text.replace(rule, rule.replace("98", str(threshold))), "runpod.yaml")
        finding = rel_findings(build_report(load_snapshot(saved), [policy]), "runpod")["REL-1020"]
        assert finding.status == status, (threshold, finding)
        assert finding.measured == pytest.approx(best, abs=1e-3)


def test_the_watch_collector_reads_as_far_back_as_the_longest_rule() -> None:
    from hostcheck.collectors.watch import EVIDENCE_DAYS

    assert EVIDENCE_DAYS == max(r["window_days"] for r in rules().values() if "window_days" in r)


def test_audit_without_a_recording_says_what_to_run(tmp_path: Path) -> None:
    from hostcheck.collectors.watch import summarise
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.report import build_report

    facts = load_snapshot(REPO / "tests" / "snapshots" / "dedicated-4090.json")
    for watch in (summarise(tmp_path / "missing.db"), None):
        if watch is None:
            facts.pop("watch", None)
        else:
            facts["watch"] = watch
        report = build_report(facts, resolve_policies(["vast", "runpod"]))
        for finding in [*rel_findings(report, "vast").values(), *rel_findings(report, "runpod").values()]:
            assert finding.status == "unknown"
            assert "run `hostcheck watch` for" in finding.detail
    # Too short a recording is unknown too, and says how much more is needed.
    db = tmp_path / "short.db"
    write_recording(db, minutes(T0, 120))
    facts["watch"] = summarise(db)
    report = build_report(facts, resolve_policies(["vast"]))
    assert "more" in rel_findings(report, "vast")["REL-1010"].detail


def test_volatile_journal_falls_back_to_the_recorders_own_stop() -> None:
    # Neither boot is known to the journal; b1 ended with systemd's SIGTERM, b2 without any stop.
    boots = [Boot("b1", None, None, None, "current boot"), Boot("b2", None, None, None, "current boot"),
             Boot("b3", None, None, None, "current boot")]
    events = [Event(T0 + 600 + 20, "recorder_stop", "b1", {"reason": "SIGTERM"})]
    samples = minutes(T0, 11, boot="b1") + minutes(T0 + 900, 11, boot="b2") + minutes(T0 + 1800, 5, boot="b3")
    a = analyse(recording_of(samples, boots, events))
    assert [o.state for o in a.outages] == ["reboot", "power"]


def test_a_quick_reboot_is_still_an_outage() -> None:
    # A container reboots in seconds, well inside the grace between samples: still a reboot.
    boots = [Boot("b1", T0 - 100, T0 + 10.5, True, "shutdown record in the journal: 'Journal stopped'"),
             Boot("b2", T0 + 12, None, None, "current boot")]
    samples = [sample(T0 + i, boot="b1", interval=1.0) for i in range(11)] + \
        [sample(T0 + 13 + i, boot="b2", interval=1.0, mono=i) for i in range(5)]
    a = analyse(recording_of(samples, boots))
    assert [(o.state, o.start - T0, o.end - T0) for o in a.outages] == [("reboot", 10.5, 13.0)]


def test_audit_says_why_a_recording_cannot_be_used(tmp_path: Path) -> None:
    from hostcheck.collectors.watch import summarise
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.report import build_report

    bad = tmp_path / "watch.db"
    bad.write_text("not a database")
    facts = load_snapshot(REPO / "tests" / "snapshots" / "dedicated-4090.json")
    facts["watch"] = summarise(bad)
    report = build_report(facts, resolve_policies(["vast"]))
    finding = rel_findings(report, "vast")["REL-1010"]
    assert finding.status == "unknown" and "not an SQLite database" in finding.detail
    assert "give --watch-db a new path" in finding.detail and "--db " not in finding.detail
    assert bad.read_text() == "not a database"


def test_ionet_continuous_on_a_recording_shorter_than_its_run_is_not_enough_data() -> None:
    # 3 minutes up, no outage: io.net's 5 h run may have started before the recording did, so
    # "below" would be a guess; with an outage inside, the count was reset and "below" is known.
    short = {s.rule_id: s for s in score_all(analyse(recording_of(minutes(T0, 3))))}
    assert short["ionet"].verdict == "unknown" and short["ionet"].summary.startswith("not enough data")
    reset = minutes(T0, 60) + minutes(T0 + 3600, 2, ok=0, mono0=3600) + minutes(T0 + 3720, 60, mono0=3720)
    after = {s.rule_id: s for s in score_all(analyse(recording_of(reset)))}
    assert after["ionet"].verdict == "below" and "1 outage reset the count" in after["ionet"].summary


def test_cli_refuses_a_watch_shorter_than_its_interval(tmp_path: Path) -> None:
    """`--for 3` at the default 60 s interval would write one sample and stop: refused, nothing written."""
    proc = run_cli("watch", "--db", str(tmp_path / "w.db"), "--for", "3")
    assert proc.returncode == 2 and "shorter than the interval (60 s)" in proc.stderr, proc.stderr
    assert not (tmp_path / "w.db").exists()
