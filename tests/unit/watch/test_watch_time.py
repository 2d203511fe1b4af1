"""Time in `hostcheck watch`: samples are ordered and measured by the boot's own clocks, the
wall clock only places boots on the calendar; a clock step is an event, never an outage and
never a loss of history. Real SQLite files, the real recorder with clocks a test can step."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hostcheck.facts import Unknown
from hostcheck.recording.analysis import analyse
from hostcheck.recording.store import SCHEMA_VERSION, Boot, Event, Recording, Sample, WatchWriter, read_recording
from hostcheck.watch.recorder import Clocks, Recorder, WatchConfig
from tests.watch_fixtures import TcpListener

T0 = 1_800_000_000.0 - 1_800_000_000.0 % 86400
DAY = 86400.0


class StepClocks(Clocks):
    """Clocks a test moves: a suspend moves wall and boottime, not monotonic; a step moves wall only."""

    def __init__(self, wall: float = T0, boot: float = 100.0) -> None:
        self.w, self.m, self.b = wall, boot, boot
        super().__init__(wall=lambda: self.w, mono=lambda: self.m, boottime=lambda: self.b)

    def advance(self, seconds: float, suspended: float = 0.0, step: float = 0.0) -> None:
        self.w += seconds + suspended + step
        self.m += seconds
        self.b += seconds + suspended


@pytest.fixture
def listener() -> Any:
    peer = TcpListener()
    yield peer
    peer.close()


def recorder(tmp_path: Path, clocks: Clocks, port: int, **kw: Any) -> Recorder:
    boot_id = tmp_path / "boot_id"
    if not boot_id.exists():
        boot_id.write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    config = WatchConfig(db=tmp_path / "w.db", interval_s=60, targets=[f"tcp:127.0.0.1:{port}"], probe_timeout_s=0.5,
                         journal_command=["journalctl", "--file", str(tmp_path / "none.journal")],
                         dpkg_log=tmp_path / "dpkg.log", nvml=Unknown("no GPU in this test"), boot_id_path=boot_id,
                         container_mark=tmp_path / "no-mark", power_supply_dir=tmp_path / "no-power",
                         upsc_command=[str(tmp_path / "no-upsc")], **kw)  # fmt: skip
    return Recorder(config, clocks=clocks, log=lambda _m: None)


def sample(t: float, boottime: float, ok: int = 3, boot: str = "b1") -> Sample:
    return Sample(t, boottime, boottime, boot, 60.0, ok, 3, None, {})


def test_backward_step_mid_outage_keeps_one_outage_of_its_length() -> None:
    """The review's case: 90 minutes up, the wall clock steps back 3,630 s, then 10 minutes with
    every target down and 80 minutes up. 180 minutes observed, one 10-minute network outage."""
    samples = [sample(T0 + 60 * i, 60 * i) for i in range(90)]
    samples += [sample(T0 + 5400 - 3630 + 60 * i, 5400 + 60 * i, ok=0 if i < 10 else 3) for i in range(90)]
    a = analyse(Recording("x", samples, [], [], {}))
    assert a.observed_s == 180 * 60
    assert [(o.state, o.seconds) for o in a.outages] == [("network", 10 * 60)]
    assert a.not_recorded_s == 0


def test_forward_step_neither_creates_nor_hides_an_outage() -> None:
    # 60 minutes up, the clock jumps forward a day, 5 minutes down, 55 up.
    samples = [sample(T0 + 60 * i, 60 * i) for i in range(60)]
    samples += [sample(T0 + DAY + 3600 + 60 * i, 3600 + 60 * i, ok=0 if i < 5 else 3) for i in range(60)]
    a = analyse(Recording("x", samples, [], [], {}))
    assert a.observed_s == 120 * 60 and a.not_recorded_s == 0
    assert [(o.state, o.seconds) for o in a.outages] == [("network", 5 * 60)]


def test_recorder_records_the_step_and_the_report_measures_by_the_boot_clock(tmp_path: Path, listener: TcpListener) -> None:
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, listener.port)
    for _ in range(30):
        rec.step()
        clocks.advance(60)
    clocks.advance(0, step=-3630)  # NTP stepped the clock back
    for _ in range(30):
        rec.step()
        clocks.advance(60)
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    jumps = [e for e in recording.events if e.kind == "clock_jump"]
    assert len(jumps) == 1 and jumps[0].detail["step_s"] == -3630
    a = analyse(recording)
    assert a.observed_s == 60 * 60 and a.outages == [] and a.not_recorded_s == 0
    # Events the recorder saw carry the boot clock and sit where the boot clock puts them.
    assert all(e.boottime is not None for e in recording.events if e.kind in ("clock_jump", "recorder_start"))


def test_a_clock_step_while_the_recorder_was_stopped_is_recorded(tmp_path: Path, listener: TcpListener) -> None:
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, listener.port)
    rec.step()
    rec.writer.close()
    rec.prober.close()
    clocks.advance(60, step=7200)
    rec = recorder(tmp_path, clocks, listener.port)  # the same boot, a new run
    rec.step()
    rec.writer.close()
    jumps = [e.detail["step_s"] for e in read_recording(tmp_path / "w.db").events if e.kind == "clock_jump"]
    assert jumps == [7200]


def test_forward_jump_past_the_retention_age_deletes_nothing(tmp_path: Path, listener: TcpListener) -> None:
    """The review's case: 120 samples, a forward jump of 100 days (a bad RTC), one sample, the
    clock stepped back, one sample. Retention (90 days) must keep all of it."""
    clocks = StepClocks()
    rec = recorder(tmp_path, clocks, listener.port)
    for _ in range(120):
        rec.step()
        clocks.advance(60)
    clocks.advance(60, step=100 * DAY)
    rec.step()
    rec.writer.prune()  # as if the hourly pruning fell right after the jump
    clocks.advance(60, step=-100 * DAY)
    rec.step()
    rec.writer.prune()
    rec.writer.close()
    recording = read_recording(tmp_path / "w.db")
    assert len(recording.samples) == 122
    assert [e.detail["step_s"] for e in recording.events if e.kind == "clock_jump"] == [100 * DAY, -100 * DAY]
    a = analyse(recording)
    assert a.outages == [] and a.uptime == 1.0


def test_age_is_measured_on_the_boot_clocks_across_boots(tmp_path: Path) -> None:
    """max age 1 hour. Boot b1: samples over 2 h; boot b2 (after the host was off 30 days):
    40 minutes. A sample of b1 is certainly older than an hour when what its own boot ran after
    it plus b2's 40 minutes exceed an hour: b1's samples older than its last 20 minutes go;
    b2 stays whole. The wall clock (here: wildly wrong for b2) plays no part."""
    db = tmp_path / "w.db"
    with WatchWriter(db, max_age_days=1 / 24) as w:
        for i in range(121):
            w.add_sample(sample(T0 + 60 * i, 1000 + 60 * i, boot="b1"))
        for i in range(41):
            w.add_sample(sample(T0 - 365 * DAY + 60 * i, 30 + 60 * i, boot="b2"))  # a wall clock a year behind
        w.prune()
    kept = read_recording(db).samples
    b1 = [s.boottime - 1000 for s in kept if s.boot_id == "b1"]
    # b1 ran 7200 s; after a sample at boot-clock x: (7200 - x) + 2400 of b2 >= 3600 unless x >= 6000.
    assert b1 == [60.0 * i for i in range(100, 121)]
    assert len([s for s in kept if s.boot_id == "b2"]) == 41


def test_retention_by_size_keeps_the_newest(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with WatchWriter(db, max_bytes=64 * 1024) as w:
        for i in range(4000):
            w.add_sample(Sample(T0 + i, i, i, "b1", 60, 3, 3, None, {"pad": "x" * 100}))
        w.add_event(Event(T0 + 3999, "xid", "b1", {"code": 79}, 3999.0))
        w.prune()
        assert w.size_bytes() <= 64 * 1024
        kept = read_recording(db)
        assert kept.samples and kept.samples[-1].t == T0 + 3999  # the newest survive
        assert [e.detail for e in kept.events] == [{"code": 79}]  # as do events written after them
        assert w.get_meta("pruned_before") == repr(kept.samples[0].t)
    with WatchWriter(db, max_bytes=1) as w:  # a limit nothing fits under: the newest sample stays
        w.prune()
    assert [s.t for s in read_recording(db).samples] == [T0 + 3999]


def test_an_older_schema_is_brought_up_to_date_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with WatchWriter(db) as w:
        w.add_sample(sample(T0, 60))
        w.add_event(Event(T0, "xid", "b1", {"code": 79}))
    # Rewrite it as schema 1 wrote it: events without a boot clock.
    conn = sqlite3.connect(db)
    conn.executescript("DROP INDEX samples_boot; ALTER TABLE events DROP COLUMN boottime; "
                       "ALTER TABLE events DROP COLUMN after_sample; PRAGMA user_version=1;")
    conn.close()
    old = read_recording(db)  # a reader reads schema 1 as it is
    assert [e.boottime for e in old.events] == [None] and len(old.samples) == 1
    with WatchWriter(db) as w:
        w.add_event(Event(T0 + 60, "clock_jump", "b1", {"step_s": 5.0}, 120.0))
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    new = read_recording(db)
    assert [(e.kind, e.boottime) for e in new.events] == [("xid", None), ("clock_jump", 120.0)]


def test_boots_whose_wall_clocks_disagree_keep_the_reboot(tmp_path: Path) -> None:
    """The second boot never synchronised its clock and sits, by its wall clock, before the
    first one ended. The reboot still shows, at least as long as the new boot's clock had run
    at its first sample (how long it had been up)."""
    boots = [Boot("b1", None, None, True, "shutdown record in the journal: 'Journal stopped'")]
    samples = [sample(T0 + 60 * i, 5000 + 60 * i, boot="b1") for i in range(30)]
    samples += [sample(T0 + 600 + 60 * i, 45 + 60 * i, boot="b2") for i in range(30)]
    a = analyse(Recording("x", samples, [], boots, {}))
    assert [o.state for o in a.outages] == ["reboot"]
    assert a.outages[0].seconds == pytest.approx(45.0)
    assert "lower bound" in a.outages[0].note
    assert a.up_s == 60 * 60
