"""The sampling loop of `hostcheck watch`: the schedule, the sample row, the events' writing, the
start and the stop.

Each interval, in this order (the order the events are written in): the clocks
(:mod:`~hostcheck.watch.clockjumps`), new kernel Xid/AER lines (:mod:`~hostcheck.watch.kernel_lines`),
new package changes (:mod:`~hostcheck.watch.pkglog`), network reachability
(:mod:`~hostcheck.watch.probes`), NVML when a GPU answers (:mod:`~hostcheck.watch.gpu`: its
readings, the increase of its thermal and power violation counters since the last sample, its
ECC counts), the public address and a CGNAT re-check when STUN servers are configured
(:mod:`~hostcheck.watch.stun`), the power source of a machine with a battery and NUT's UPS
status where `upsc` is installed (:mod:`~hostcheck.watch.power_source`), the forwarded ports through
the owner's probe server when one is configured, at the owner's rate
(:mod:`~hostcheck.watch.inbound`), and drift every 5 minutes (:mod:`~hostcheck.watch.drift`).
At the start the boots come from the journal (:mod:`~hostcheck.watch.boots`).

Each sampler is called through :class:`~hostcheck.watch.sampler.Sampler` and writes through this
recorder as its :class:`~hostcheck.watch.sampler.Sink`. Each part is guarded: a part that fails
is recorded as a reason and the loop goes on. A sample that cannot be written (a full disk) is
counted, and when writing works again a ``gap`` event says from when to when and why nothing was
recorded. What was committed is never rewritten; retention only deletes what is certainly old
(see :meth:`hostcheck.recording.store.WatchWriter.age_cutoffs`).
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hostcheck.collectors.power import POWER_SUPPLY_DIR
from hostcheck.errors import InputError
from hostcheck.recording.store import DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_BYTES, Event, Sample, WatchWriter
from hostcheck.watch import pkglog
from hostcheck.watch.boots import BOOT_ID_PATH, CONTAINER_MARK, read_boot_id, sync_boots
from hostcheck.watch.clockjumps import ClockJumps
from hostcheck.watch.drift import DRIFT_EVERY_S, MIN_DRIFT_EVERY_S, DriftSampler, DriftSources
from hostcheck.watch.gpu import GpuSampler
from hostcheck.watch.inbound import InboundProbe
from hostcheck.watch.journal import Journal, Readability
from hostcheck.watch.kernel_lines import KernelLines
from hostcheck.watch.power_source import PowerSource, Ups
from hostcheck.watch.probes import (
    DEFAULT_DNS_NAME,
    DEFAULT_TARGETS,
    DEFAULT_TIMEOUT_S,
    NetworkProber,
    answered,
    parse_targets,
)
from hostcheck.watch.sampler import Sampler, Tick
from hostcheck.watch.stun import PublicAddress

PRUNE_EVERY_S = 3600.0
DEFAULT_INTERVAL_S = 60.0
MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 3600.0
MIN_PROBE_EVERY_S = 300.0  # the forwarded-port check: at most one every 5 minutes
MAX_PROBE_PORTS = 8


@dataclass
class Clocks:
    """The three clocks a sample carries; replaceable so a test can step them."""

    wall: Callable[[], float] = time.time
    mono: Callable[[], float] = time.monotonic
    boottime: Callable[[], float] = field(default=lambda: time.clock_gettime(time.CLOCK_BOOTTIME))


class SampleHook(Protocol):
    """Something that follows the recording (the metrics file, notifications): called after
    each sample is written, on the recorder's thread; it must return quickly and never raise
    into the loop (what it raises is logged)."""

    def after_sample(self, writer: WatchWriter, sample: Sample) -> None: ...

    def close(self) -> None: ...


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
    power_supply_dir: Path = POWER_SUPPLY_DIR
    upsc_command: list[str] = field(default_factory=lambda: ["upsc"])
    public_ranges: list[str] = field(default_factory=list)  # reserved ranges to count as public (labs)
    # The owner's probe server for the forwarded ports (opt-in): URL, token, pinned certificate,
    # the ports [(port, "tcp"|"udp")] and how often (seconds, at least MIN_PROBE_EVERY_S).
    probe_url: str | None = None
    probe_token: str | None = None
    probe_fingerprint: str | None = None
    probe_ports: list[tuple[int, str]] = field(default_factory=list)
    probe_every_s: float = 3600.0
    hooks: list[SampleHook] = field(default_factory=list)
    drift: DriftSources = field(default_factory=DriftSources)
    drift_every_s: float = DRIFT_EVERY_S


class Recorder:
    def __init__(self, config: WatchConfig, clocks: Clocks | None = None, log: Callable[[str], None] | None = None):
        if not MIN_INTERVAL_S <= config.interval_s <= MAX_INTERVAL_S:
            raise InputError(f"--interval must be {MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g} seconds")
        if config.probe_url is not None:
            if not config.probe_ports:
                raise InputError("--probe needs the forwarded ports to check (--probe-port PORT[/tcp|/udp])")
            if len(config.probe_ports) > MAX_PROBE_PORTS:
                raise InputError(f"at most {MAX_PROBE_PORTS} forwarded ports are checked")
            if not config.probe_every_s >= MIN_PROBE_EVERY_S:
                raise InputError(f"--probe-every must be at least {MIN_PROBE_EVERY_S / 60:g} minutes")
        if not MIN_DRIFT_EVERY_S <= config.drift_every_s:
            raise InputError(f"--drift-every must be at least {MIN_DRIFT_EVERY_S:g}s")
        self.config = config
        self.clocks = clocks or Clocks()
        self.log = log or (lambda msg: print(f"hostcheck watch: {msg}", file=sys.stderr, flush=True))
        self.targets = parse_targets(config.targets)
        self.stop = threading.Event()
        self.stop_reason = "duration reached"
        self.writer = WatchWriter(config.db, max_age_days=config.max_age_days, max_bytes=config.max_bytes)
        self.journal = Journal(config.journal_command)
        self.boot_id = read_boot_id(config.boot_id_path, config.container_mark,
                                    None if config.journal_command else self.journal.newest_boot())
        self.prober = NetworkProber(self.targets, config.probe_timeout_s, config.dns_name)
        self.states: dict[str, Any] = {}  # last recorded state per watched source (power, UPS, ECC, drift)
        self.unwritten: list[tuple[float, str]] = []
        self.samples_written = 0
        last = self.writer.last_sample()
        # The same boot as the last sample written: a clock step or suspend while the recorder
        # was stopped is seen at the first sample.
        prev = (last.t, last.mono, last.boottime) if last is not None and last.boot_id == self.boot_id else None
        self.clock_jumps = ClockJumps(prev)
        self.journal_readable = Readability()
        self.kernel_lines = KernelLines(self.journal, self.journal_readable)
        self.gpu = GpuSampler(config.nvml, config.interval_s, lambda: self.kernel_lines.gpu_out_of_service)
        # The samplers in the order they run: the logs before the network probes and the GPU,
        # the rest after them.
        self.logs: Sequence[Sampler] = (self.kernel_lines, pkglog.PackageChanges(config.dpkg_log))
        self.sources: Sequence[Sampler] = (
            PublicAddress(config.stun_servers, config.stun_every, config.public_ranges),
            PowerSource(config.power_supply_dir),
            Ups(config.upsc_command),
            InboundProbe(config.probe_url, config.probe_token, config.probe_fingerprint, config.probe_ports,
                         config.probe_every_s),
            DriftSampler(config.drift, config.drift_every_s),
        )
        self.last_prune_mono: float | None = None
        self.count = 0

    @property
    def gpu_out_of_service(self) -> str | None:
        """The Xid of this boot that took the GPUs out of service (None: in service)."""
        return self.kernel_lines.gpu_out_of_service

    # ------------------------------------------------------------------ guarded writes (the samplers' Sink)

    def event(self, kind: str, detail: dict[str, Any], t: float | None = None) -> None:
        """An event seen now (``t`` None: it carries the boot clock), or one read from a log
        (``t``: the log's own time)."""
        seen_now = t is None
        event = Event(self.clocks.wall() if t is None else t, kind, self.boot_id, detail,
                      self.clocks.boottime() if seen_now else None)
        try:
            self.writer.add_event(event)
        except sqlite3.Error as exc:
            self.unwritten.append((self.clocks.wall(), f"event {kind}: {exc}"))

    def state(self, source: str, state: Any, kind: str, detail: dict[str, Any]) -> None:
        """Record ``detail`` as a ``kind`` event when ``source``'s state differs from the last one
        recorded in this run (the first reading is recorded too: it says where things started)."""
        if self.states.get(source, object()) != state:
            previous = self.states.get(source)
            self.states[source] = state
            self.event(kind, {**detail, "previous": previous})

    # ------------------------------------------------------------------ start-up and one interval

    def _sync_boots(self) -> None:
        """The journal's boots, written once at the start of a run."""
        sync_boots(self.journal, self.journal_readable, self, self.clocks.wall)

    def _run_samplers(self, samplers: Sequence[Sampler], tick: Tick) -> None:
        for sampler in samplers:
            try:
                sampler.sample(tick, self)
            except sqlite3.Error:
                raise
            except Exception as exc:  # a part that breaks is a reason, never the end of the recording
                self.log(f"{sampler.name}: {type(exc).__name__}: {exc}")

    def sample_once(self) -> None:
        tick = Tick(self.clocks.wall(), self.clocks.mono(), self.clocks.boottime(), self.count)
        self.clock_jumps.sample(tick, self)  # arithmetic and guarded writes only: nothing to guard
        self._run_samplers(self.logs, tick)
        net = self.prober.sample()
        gpu_ok, gpu_detail = self.gpu.read(tick, self)
        self._run_samplers(self.sources, tick)
        sample = Sample(tick.wall, tick.mono, tick.boot, self.boot_id, self.config.interval_s, answered(net), len(net),
                        gpu_ok, {"net": net, **gpu_detail})
        self.writer.add_sample(sample)
        self.samples_written += 1
        for hook in self.config.hooks:
            try:
                hook.after_sample(self.writer, sample)
            except Exception as exc:  # what follows the recording never stops it
                self.log(f"{type(hook).__name__}: {type(exc).__name__}: {exc}")

    def _flush_gap(self) -> None:
        if not self.unwritten:
            return
        first, reason = self.unwritten[0]
        last = self.unwritten[-1][0]
        detail = {"from": first, "to": last, "lost_samples": len(self.unwritten), "reason": reason}
        self.writer.add_event(Event(self.clocks.wall(), "gap", self.boot_id, detail, self.clocks.boottime()))
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
        mono = self.clocks.mono()
        if self.last_prune_mono is None or mono - self.last_prune_mono >= PRUNE_EVERY_S:
            self.last_prune_mono = mono
            try:
                deleted = self.writer.prune()
            except sqlite3.Error as exc:
                self.log(f"pruning failed: {exc}")
            else:
                if deleted:
                    self.event("retention", {"deleted_rows": deleted, "max_age_days": self.config.max_age_days,
                                              "max_bytes": self.config.max_bytes})

    def begin(self) -> None:
        """What a run does before its first sample: say it started, read the boot list."""
        self.event("recorder_start", {"interval_s": self.config.interval_s, "targets": [t.label for t in self.targets]})
        try:
            self._sync_boots()
        except sqlite3.Error as exc:
            self.log(f"boot list not recorded: {exc}")

    def finish(self) -> None:
        """What a run does as it stops: say why (systemd's SIGTERM at shutdown is a clean stop)."""
        try:
            self.event("recorder_stop", {"reason": self.stop_reason, "samples": self.samples_written})
        finally:
            for hook in self.config.hooks:
                hook.close()
            self.prober.close()
            self.writer.close()

    def run(self) -> int:
        start = self.clocks.mono()
        until = None if self.config.duration_s is None else start + self.config.duration_s
        self.begin()
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
            self.finish()
        return self.samples_written

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: Any) -> None:
            self.stop_reason = signal.Signals(signum).name
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
