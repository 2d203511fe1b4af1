"""The sampling loop of `hostcheck watch`.

Each interval: network reachability, NVML (when a GPU answers), new kernel Xid/AER lines, new
package changes, the public address (when STUN servers are configured), and the clocks. Each
part is guarded: a part that fails is recorded as a reason and the loop goes on. A sample that
cannot be written (a full disk) is counted, and when writing works again a ``gap`` event says
from when to when and why nothing was recorded. What was committed is never rewritten.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostcheck.errors import InputError
from hostcheck.facts import Unknown
from hostcheck.watch import pkglog
from hostcheck.watch.journal import Journal, entry_time
from hostcheck.watch.probes import (
    DEFAULT_DNS_NAME,
    DEFAULT_TARGETS,
    DEFAULT_TIMEOUT_S,
    NetworkProber,
    answered,
    parse_targets,
)
from hostcheck.watch.store import DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_BYTES, Boot, Event, Sample, WatchWriter
from hostcheck.watch.xid import classify_line

BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
CLOCK_JUMP_S = 2.0
PRUNE_EVERY_S = 3600.0
THROTTLE_WATCHED = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
DEFAULT_INTERVAL_S = 60.0
MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 3600.0


CONTAINER_MARK = Path("/run/systemd/container")


def read_boot_id(path: Path = BOOT_ID_PATH, container_mark: Path = CONTAINER_MARK) -> str:
    """The kernel's boot id. A container shares its kernel's boot id across its own reboots,
    so there the start time of its PID 1 is added: each container boot gets a key of its own
    (its journal cannot tell those boots apart; the recorder's own stop records then do)."""
    try:
        boot_id = path.read_text(encoding="ascii").strip().replace("-", "")
    except OSError:
        return "unknown"
    if container_mark.exists():
        try:
            fields = Path("/proc/1/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
            return f"{boot_id}.{fields[19]}"  # field 22 of stat: start time after the kernel booted
        except (OSError, IndexError):
            pass
    return boot_id


@dataclass
class Clocks:
    """The three clocks a sample carries; replaceable so a test can step them."""

    wall: Callable[[], float] = time.time
    mono: Callable[[], float] = time.monotonic
    boottime: Callable[[], float] = field(default=lambda: time.clock_gettime(time.CLOCK_BOOTTIME))


@dataclass
class WatchConfig:
    db: Path
    interval_s: float = DEFAULT_INTERVAL_S
    duration_s: float | None = None
    targets: list[str] = field(default_factory=lambda: list(DEFAULT_TARGETS))
    probe_timeout_s: float = DEFAULT_TIMEOUT_S
    dns_name: str = DEFAULT_DNS_NAME
    stun_servers: list[str] = field(default_factory=list)
    stun_every: int = 5  # samples between STUN bindings
    journal_command: list[str] | None = None
    dpkg_log: Path = pkglog.DPKG_LOG
    nvml: Any = None  # a pynvml-like module; None loads the real one
    max_age_days: float = DEFAULT_MAX_AGE_DAYS
    max_bytes: int = DEFAULT_MAX_BYTES
    boot_id_path: Path = BOOT_ID_PATH
    container_mark: Path = CONTAINER_MARK  # systemd writes it inside a container


class Recorder:
    def __init__(self, config: WatchConfig, clocks: Clocks | None = None, log: Callable[[str], None] | None = None):
        if not MIN_INTERVAL_S <= config.interval_s <= MAX_INTERVAL_S:
            raise InputError(f"--interval must be {MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g} seconds")
        self.config = config
        self.clocks = clocks or Clocks()
        self.log = log or (lambda msg: print(f"hostcheck watch: {msg}", file=sys.stderr, flush=True))
        self.targets = parse_targets(config.targets)
        self.stop = threading.Event()
        self.stop_reason = "duration reached"
        self.writer = WatchWriter(config.db, max_age_days=config.max_age_days, max_bytes=config.max_bytes)
        self.journal = Journal(config.journal_command)
        self.boot_id = read_boot_id(config.boot_id_path, config.container_mark)
        self.prober = NetworkProber(self.targets, config.probe_timeout_s, config.dns_name)
        self.nvml = config.nvml
        self.nvml_seen = False
        self.reboot_xid_this_boot = False
        self.last_throttle: dict[str, list[str]] = {}
        self.public_address: str | None = None
        self.journal_state: str | None = None
        self.unwritten: list[tuple[float, str]] = []
        self.samples_written = 0
        self.prev: tuple[float, float, float] | None = None
        self.last_prune = 0.0
        self.count = 0

    # ------------------------------------------------------------------ small guarded writes

    def _event(self, kind: str, detail: dict[str, Any], t: float | None = None) -> None:
        try:
            self.writer.add_event(Event(self.clocks.wall() if t is None else t, kind, self.boot_id, detail))
        except sqlite3.Error as exc:
            self.unwritten.append((self.clocks.wall(), f"event {kind}: {exc}"))

    # ------------------------------------------------------------------ start-up

    def _sync_boots(self) -> None:
        boots = self.journal.boots()
        if isinstance(boots, Unknown):
            self._journal_state(f"boot list unreadable: {boots.reason}")
            self.writer.put_boot(Boot(self.boot_id, self.clocks.wall(), None, None, "boot seen by the recorder only"))
            return
        known = {row[0] for row in self.writer.conn.execute("SELECT boot_id FROM boots")}
        for boot in boots:
            if boot.boot_id == self.boot_id:
                self.writer.put_boot(Boot(boot.boot_id, boot.first_t, None, None, "current boot"))
                continue
            # A boot that has ended: did it shut down, or just stop?
            clean, evidence = self.journal.shutdown_record(boot.boot_id)
            if clean is None and boot.boot_id in known:
                continue
            self.writer.put_boot(Boot(boot.boot_id, boot.first_t, boot.last_t, clean, evidence))
            if boot.boot_id not in known:
                self._event("boot", {"boot_id": boot.boot_id, "clean": clean, "evidence": evidence}, t=boot.first_t)
        if self.boot_id not in {b.boot_id for b in boots}:
            self.writer.put_boot(Boot(self.boot_id, self.clocks.wall(), None, None, "current boot (not in the journal)"))

    def _journal_state(self, state: str | None) -> None:
        """Record when the journal becomes unreadable or readable again, not every interval."""
        if state != self.journal_state:
            self.journal_state = state
            self._event("journal", {"readable": state is None, "reason": state or "readable again"})
            if state:
                self.log(f"journal: {state}; boots and kernel lines are not being recorded")

    # ------------------------------------------------------------------ one interval

    def _kernel_lines(self, now: float) -> None:
        cursor = self.writer.get_meta("kernel_cursor")
        result = self.journal.kernel_entries(cursor, since=now - 86400)
        if isinstance(result, Unknown):
            self._journal_state(f"kernel log unreadable: {result.reason}")
            return
        self._journal_state(None)
        entries, new_cursor = result
        for entry in entries:
            detail = classify_line(str(entry.get("MESSAGE", "")))
            if detail is None:
                continue
            kind = str(detail.pop("kind"))
            if detail.get("needs_reboot") and self.boot_id.startswith(str(entry.get("_BOOT_ID", self.boot_id))):
                self.reboot_xid_this_boot = True
            self._event(kind, detail, t=entry_time(entry) or now)
        if new_cursor and new_cursor != cursor:
            self.writer.set_meta("kernel_cursor", new_cursor)

    def _packages(self, now: float) -> None:
        position = self.writer.get_meta("dpkg_position")
        changes, new_position, problem = pkglog.read_new(self.config.dpkg_log, position)
        if problem:
            self.log(problem)
        for change in changes:
            if position is None and change.t < now - 86400:
                continue  # first read: only the last day of history
            self._event("package", {"action": change.action, "package": change.package, "old": change.old, "new": change.new}, t=change.t)
        if new_position and new_position != position:
            self.writer.set_meta("dpkg_position", new_position)

    def _gpu(self) -> tuple[bool | None, dict[str, Any]]:
        from hostcheck.collectors.gpu import load_nvml, nvml_facts

        if self.nvml is None:
            self.nvml = load_nvml()
        if isinstance(self.nvml, Unknown):
            return (False if self.nvml_seen else None), {"nvml": self.nvml.reason}
        facts = nvml_facts(self.nvml)
        if not facts["nvml"]["available"]:
            if self.nvml_seen:
                self._event("nvml", {"error": facts["nvml"]["reason"]})
            return (False if self.nvml_seen else None), {"nvml": facts["nvml"]["reason"]}
        self.nvml_seen = True
        devices = facts["devices"]
        if isinstance(devices, Unknown):
            self._event("nvml", {"error": devices.reason})
            return False, {"nvml": devices.reason}
        ok = not self.reboot_xid_this_boot
        readings = []
        for dev in devices:
            lost = [k for k, v in dev.items() if isinstance(v, Unknown) and "lost" in v.reason]
            if lost:
                ok = False
                self._event("nvml", {"gpu": dev["index"], "error": dev[lost[0]].reason})
            reasons = dev.get("throttle_reasons")
            watched = sorted(set(reasons) & THROTTLE_WATCHED) if isinstance(reasons, list) else []
            key = str(dev["index"])
            if watched != self.last_throttle.get(key, []):
                self._event("throttle", {"gpu": dev["index"], "reasons": watched})
                self.last_throttle[key] = watched
            readings.append(
                {
                    "i": dev["index"],
                    "temp": None if isinstance(dev.get("temperature_c"), Unknown) else dev.get("temperature_c"),
                    "w": None if isinstance(dev.get("power_draw_w"), Unknown) else dev.get("power_draw_w"),
                    "thr": watched,
                }
            )
        return ok, {"gpus": readings}

    def _stun(self) -> None:
        if not self.config.stun_servers or self.count % max(1, self.config.stun_every):
            return
        from hostcheck.netprobe.stun_client import stun_binding
        from hostcheck.netprobe.stun_servers import parse_server

        for spec in self.config.stun_servers:
            try:
                host, port = parse_server(spec)
                result = stun_binding((host, port), deadline=time.monotonic() + 3.0)
            except (OSError, ValueError) as exc:
                self.log(f"STUN {spec}: {exc}")
                continue
            if result.mapped is None:
                continue
            mapped = result.mapped[0]
            if mapped != self.public_address:
                previous = self.public_address if self.public_address is not None else self.writer.get_meta("public_address")
                self._event("public_address", {"address": mapped, "previous": previous, "server": spec})
                self.writer.set_meta("public_address", mapped)
                self.public_address = mapped
            return

    def _clocks(self, wall: float, mono: float, boot: float) -> None:
        if self.prev is not None:
            p_wall, p_mono, p_boot = self.prev
            suspended = (boot - p_boot) - (mono - p_mono)
            if suspended > CLOCK_JUMP_S:
                self._event("suspend", {"seconds": round(suspended, 1), "from": p_wall + (mono - p_mono)}, t=wall)
            step = (wall - p_wall) - (boot - p_boot)
            if abs(step) > CLOCK_JUMP_S:
                self._event("clock_jump", {"step_s": round(step, 3)}, t=wall)
        self.prev = (wall, mono, boot)

    def sample_once(self) -> None:
        wall, mono, boot = self.clocks.wall(), self.clocks.mono(), self.clocks.boottime()
        self._clocks(wall, mono, boot)
        for part in (self._kernel_lines, self._packages):
            try:
                part(wall)
            except sqlite3.Error:
                raise
            except Exception as exc:  # a part that breaks is a reason, never the end of the recording
                self.log(f"{part.__name__.strip('_')}: {type(exc).__name__}: {exc}")
        net = self.prober.sample()
        try:
            gpu_ok, gpu_detail = self._gpu()
        except Exception as exc:
            gpu_ok, gpu_detail = (False if self.nvml_seen else None), {"nvml": f"{type(exc).__name__}: {exc}"}
        try:
            self._stun()
        except Exception as exc:
            self.log(f"stun: {type(exc).__name__}: {exc}")
        sample = Sample(wall, mono, boot, self.boot_id, self.config.interval_s, answered(net), len(net), gpu_ok,
                        {"net": net, **gpu_detail})
        self.writer.add_sample(sample)
        self.samples_written += 1

    def _flush_gap(self) -> None:
        if not self.unwritten:
            return
        first, reason = self.unwritten[0]
        last = self.unwritten[-1][0]
        detail = {"from": first, "to": last, "lost_samples": len(self.unwritten), "reason": reason}
        self.writer.add_event(Event(self.clocks.wall(), "gap", self.boot_id, detail))
        self.unwritten = []

    def step(self) -> None:
        """One interval, never raising: a failed write becomes part of a gap."""
        try:
            self.sample_once()
            self._flush_gap()  # only once a sample went in: the disk has room again
        except sqlite3.Error as exc:
            reason = f"the database could not be written: {exc}"
            if not self.unwritten:
                self.log(f"{reason}; recording goes on and the gap will be recorded")
            self.unwritten.append((self.clocks.wall(), reason))
        self.count += 1
        now = self.clocks.wall()
        if now - self.last_prune >= PRUNE_EVERY_S:
            self.last_prune = now
            try:
                self.writer.prune(now)
            except sqlite3.Error as exc:
                self.log(f"pruning failed: {exc}")

    def run(self) -> int:
        start = self.clocks.mono()
        until = None if self.config.duration_s is None else start + self.config.duration_s
        self._event("recorder_start", {"interval_s": self.config.interval_s, "targets": [t.label for t in self.targets]})
        try:
            self._sync_boots()
        except sqlite3.Error as exc:
            self.log(f"boot list not recorded: {exc}")
        next_tick = self.clocks.mono()
        try:
            while not self.stop.is_set():
                self.step()
                next_tick += self.config.interval_s
                now = self.clocks.mono()
                if next_tick < now:  # fell behind (suspend, a slow probe): do not burst
                    next_tick = now
                if until is not None and next_tick >= until:
                    break
                self.stop.wait(max(0.0, next_tick - now))
        finally:
            self._event("recorder_stop", {"reason": self.stop_reason, "samples": self.samples_written})
            self.prober.close()
            self.writer.close()
        return self.samples_written

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: Any) -> None:
            self.stop_reason = signal.Signals(signum).name
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
