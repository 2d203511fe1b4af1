"""A simulated week of `hostcheck watch`, for the README's example report.

A real week cannot be recorded for a test suite, so this drives the real recorder (its real
SQLite writer, its real probes, journalctl reading real journal files, the dpkg log reader)
through simulated time: the clocks the recorder reads are stepped a sample interval at a
time, and outages are injected between samples:

- network cuts: the three DNS targets (responders on loopback) stop answering;
- a clean reboot: the recorder is stopped as systemd stops it (SIGTERM), the boot's journal
  ends with "Journal stopped", and a new boot (new boot id, boot clocks from zero) starts
  after the downtime; an NVIDIA driver upgrade in the dpkg log comes before it;
- a driver fault: an Xid 79 ("GPU has fallen off the bus") line in the kernel log, NVML
  (the test suite's stand-in for an RTX 3080 Ti Laptop GPU) loses the GPU, and the owner
  reboots it later;
- a power cut: nothing is stopped, the journal has no shutdown record for the boot; the next
  boot's wall clock starts two hours fast (an RTC kept in local time) until NTP steps it back.

The report is then `hostcheck watch report` on the database written.

    .venv/bin/python bench/watch_week.py --db /tmp/week.db            # 7 days (a few minutes)
    .venv/bin/hostcheck watch report --db /tmp/week.db
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hostcheck.collectors.gpu import NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL
from hostcheck.watch.recorder import Clocks, Recorder, WatchConfig

INTERVAL_S = 60.0
START = 1_795_392_000.0  # 2026-11-23 00:00 UTC, a Monday
BOOT_TO_FIRST_SAMPLE_S = 60.0  # a boot takes a minute to reach the recorder's first sample
RTC_OFFSET_S = 7200.0  # after the power cut the RTC runs two hours fast until NTP corrects it
NTP_AFTER_SAMPLES = 3
DRIVER_REBOOT_S = 180.0  # the owner's reboot after the driver fault


@dataclass(frozen=True)
class Injected:
    """One outage: its kind, when it starts (seconds after START) and how long it lasts."""

    kind: str  # "network" | "reboot" | "driver" | "power"
    at_s: float
    minutes: float


def day(d: int, hh: int, mm: int) -> float:
    return d * 86400.0 + hh * 3600.0 + mm * 60.0


WEEK = [
    Injected("network", day(1, 3, 10), 25),  # the ISP's nightly reset
    Injected("reboot", day(2, 14, 0), 4),  # after a driver upgrade
    Injected("driver", day(3, 20, 30), 47),  # Xid 79, until the owner reboots
    Injected("power", day(5, 9, 15), 38),  # a power cut, no UPS
    Injected("network", day(6, 18, 40), 3),
]
# Each kind of outage once, within six hours (tests/unit/watch/test_watch_week.py).
QUARTER_DAY = [
    Injected("network", day(0, 0, 40), 5),
    Injected("reboot", day(0, 1, 30), 4),
    Injected("driver", day(0, 2, 30), 47),
    Injected("power", day(0, 4, 15), 38),
]


class SimClocks(Clocks):
    """The clocks the recorder reads, stepped by the simulation. ``rtc_fast`` samples to go
    with the wall clock two hours fast (after the power cut), before NTP steps it back."""

    def __init__(self, wall: float) -> None:
        self.w, self.m, self.b = wall, BOOT_TO_FIRST_SAMPLE_S, BOOT_TO_FIRST_SAMPLE_S
        self.rtc_fast = 0
        super().__init__(wall=lambda: self.w, mono=lambda: self.m, boottime=lambda: self.b)

    @property
    def real(self) -> float:
        return self.w - (RTC_OFFSET_S if self.rtc_fast else 0.0)

    def advance(self, seconds: float) -> None:
        self.w += seconds
        self.m += seconds
        self.b += seconds


class Host:
    """The simulated machine: its boots, journal files, dpkg log, GPU and network targets."""

    def __init__(self, work: Path, db: Path) -> None:
        from tests.nvml_standin import NOT_SUPPORTED, laptop_3080ti
        from tests.watch_fixtures import CountingNvml, DnsResponder

        self.work, self.db = work, db
        self.targets = [DnsResponder(records=6) for _ in range(3)]
        # An RTX 3080 Ti Laptop GPU (no ECC counts on GeForce), its violation counters set here.
        self.nvml = CountingNvml({**laptop_3080ti(), "nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED})
        self.thermal_s = self.power_s = 0.0
        self.journal_files: list[str] = []
        self.boot_id = ""
        self.boot_start = 0.0
        self.boots = 0
        self.dpkg = work / "dpkg.log"
        self.dpkg.write_text("")
        self.boot_id_file = work / "boot_id"
        ac = work / "power_supply" / "AC"
        ac.mkdir(parents=True)
        (ac / "type").write_text("Mains\n")
        (ac / "online").write_text("1\n")

    def journal(self, entries: list[tuple[float, str, dict[str, str]]]) -> None:
        """Kernel and journald lines of the running boot, as a new journal file the recorder reads."""
        from tests.watch_fixtures import journal_entry, write_journal

        path = self.work / f"journal-{len(self.journal_files) // 2}.journal"
        write_journal(path, [journal_entry(self.boot_id, t, msg, monotonic=t - self.boot_start, **extra)
                             for t, msg, extra in entries])
        self.journal_files += ["--file", str(path)]

    def power_on(self, real_time: float) -> SimClocks:
        """A new boot at ``real_time``; its first sample comes a minute later."""
        self.boots += 1
        self.boot_start = real_time
        self.boot_id = uuid.UUID(int=self.boots).hex
        self.boot_id_file.write_text(str(uuid.UUID(self.boot_id)) + "\n")
        self.journal([(real_time, "Linux version 6.8.0-50-generic (buildd@lcy02-amd64-010)", {})])
        self.nvml.lost = set()
        return SimClocks(real_time + BOOT_TO_FIRST_SAMPLE_S)

    def recorder(self, clocks: SimClocks) -> Recorder:
        config = WatchConfig(
            db=self.db, interval_s=INTERVAL_S, targets=[f"dns:127.0.0.1:{t.port}" for t in self.targets],
            probe_timeout_s=0.2, journal_command=["journalctl", *self.journal_files], dpkg_log=self.dpkg,
            nvml=self.nvml, boot_id_path=self.boot_id_file, container_mark=self.work / "no-container",
            power_supply_dir=self.work / "power_supply",
        )  # fmt: skip
        rec = Recorder(config, clocks=clocks, log=lambda _m: None)
        rec.begin()
        return rec

    def network(self, up: bool) -> None:
        for t in self.targets:
            t.muted = not up

    def load(self, real: float) -> None:
        """The GPU is rented from 13:00 to 17:00 UTC each day: held at its 45 W cap for 40 s of
        each minute (NVML's power violation counter) and slowed for heat 6 s of each minute
        (its thermal violation counter)."""
        if 13 * 3600 <= (real - START) % 86400 < 17 * 3600:
            self.power_s += 40.0
            self.thermal_s += 6.0
        self.nvml.violation_ns = {NVML_PERF_POLICY_THERMAL: int(self.thermal_s * 1e9),
                                  NVML_PERF_POLICY_POWER: int(self.power_s * 1e9)}

    def close(self) -> None:
        for t in self.targets:
            t.close()


class Simulation:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.clocks = host.power_on(START - BOOT_TO_FIRST_SAMPLE_S)
        self.rec = host.recorder(self.clocks)

    def sample(self) -> None:
        self.host.load(self.clocks.real)
        self.rec.step()
        if self.clocks.rtc_fast:
            self.clocks.rtc_fast -= 1
            if not self.clocks.rtc_fast:
                self.clocks.w -= RTC_OFFSET_S  # NTP steps the wall clock back
        self.clocks.advance(INTERVAL_S)

    def sample_until(self, real: float) -> None:
        while self.clocks.real < real:
            self.sample()

    def stop_and_boot(self, down_s: float, clean: bool) -> None:
        """Stop now (cleanly: systemd's SIGTERM, then journald's last record; or as a power cut
        does, nothing at all) and power on so that the new boot's first sample is ``down_s`` later."""
        at = self.clocks.real
        if clean:
            self.rec.stop_reason = "SIGTERM"
            self.rec.finish()
            self.host.journal([(at, "Journal stopped", {"_TRANSPORT": "driver",
                                                        "MESSAGE_ID": "d93fb3c9c24d451a97cea615ce59c00b"})])
        else:
            self.rec.prober.close()
            self.rec.writer.close()
        self.clocks = self.host.power_on(at + down_s - BOOT_TO_FIRST_SAMPLE_S)
        self.rec = self.host.recorder(self.clocks)

    def inject(self, event: Injected) -> None:
        length = event.minutes * 60.0
        if event.kind == "network":
            self.host.network(up=False)
            self.sample_until(self.clocks.real + length)
            self.host.network(up=True)
        elif event.kind == "reboot":
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.clocks.real - 600))
            with self.host.dpkg.open("a") as fh:
                fh.write(f"{stamp} upgrade nvidia-driver-550:amd64 550.120-0ubuntu1 550.127.05-0ubuntu1\n")
            self.stop_and_boot(length, clean=True)
        elif event.kind == "driver":
            self.host.journal([(self.clocks.real, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, "
                                                  "GPU has fallen off the bus.", {})])
            self.host.nvml.lost = {0}
            self.rec.journal.command = ["journalctl", *self.host.journal_files]
            # Gone until the owner notices and reboots (a clean reboot of 3 minutes).
            self.sample_until(self.clocks.real + length - DRIVER_REBOOT_S)
            self.stop_and_boot(DRIVER_REBOOT_S, clean=True)
        elif event.kind == "power":
            self.stop_and_boot(length, clean=False)
            self.clocks.w += RTC_OFFSET_S
            self.clocks.rtc_fast = NTP_AFTER_SAMPLES
        else:
            raise ValueError(f"unknown outage kind {event.kind!r}")

    def finish(self) -> None:
        self.rec.stop_reason = "duration reached"
        self.rec.finish()


def simulate(db: Path, days: float = 7, schedule: list[Injected] | None = None, progress: bool = False) -> list[Injected]:
    """Record ``days`` of simulated time into ``db`` with the ``schedule``'s outages injected."""
    schedule = sorted(WEEK if schedule is None else schedule, key=lambda i: i.at_s)
    end = START + days * 86400.0
    with tempfile.TemporaryDirectory(prefix="watch-week-") as tmp:
        host = Host(Path(tmp), db)
        try:
            sim = Simulation(host)
            for event in schedule:
                sim.sample_until(START + event.at_s)
                sim.inject(event)
                if progress:
                    print(f"{event.kind} at +{event.at_s / 86400:.2f} d injected", file=sys.stderr)
            sim.sample_until(end)
            sim.finish()
        finally:
            host.close()
    return schedule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--days", type=float, default=7.0)
    args = parser.parse_args()
    if args.db.exists():
        raise SystemExit(f"{args.db} exists: give a new path")
    started = time.monotonic()
    schedule = simulate(args.db, args.days, [i for i in WEEK if i.at_s < args.days * 86400], progress=True)
    print(f"recorded {args.days:g} simulated days into {args.db} in {time.monotonic() - started:.0f} s; injected:",
          file=sys.stderr)
    for i in schedule:
        print(f"  {i.kind:8} at +{i.at_s / 86400:.3f} d for {i.minutes:g} min", file=sys.stderr)


if __name__ == "__main__":
    main()
