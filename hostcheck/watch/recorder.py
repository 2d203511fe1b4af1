"""The sampling loop of `hostcheck watch`.

Each interval: network reachability, NVML (when a GPU answers: its readings, the increase of
its thermal and power violation counters since the last sample, its ECC counts), new kernel
Xid/AER lines, new package changes, the power source (machines with a battery) and NUT's UPS
status (where `upsc` is installed), drift (the default route's address, gateway, DHCP and
link, the NVIDIA driver's parts, a pending reboot, agent restarts: :mod:`hostcheck.watch.drift`,
every 5 minutes), the public address and a CGNAT re-check (when STUN servers
are configured), the forwarded ports through the owner's probe server (when one is configured,
at the owner's rate), and the clocks. Each part is guarded: a part that fails is recorded as a
reason and the loop goes on. A sample that cannot be written (a full disk) is counted, and when
writing works again a ``gap`` event says from when to when and why nothing was recorded. What
was committed is never rewritten; retention only deletes what is certainly old (see
:meth:`hostcheck.recording.store.WatchWriter.age_cutoffs`).
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
from typing import Any, Protocol

from hostcheck.collectors.power import POWER_SUPPLY_DIR
from hostcheck.errors import InputError
from hostcheck.facts import Unknown
from hostcheck.recording.analysis import GRACE_EXTRA_S
from hostcheck.recording.store import DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_BYTES, Boot, Event, Sample, WatchWriter
from hostcheck.watch import pkglog
from hostcheck.watch.drift import DRIFT_EVERY_S, MIN_DRIFT_EVERY_S, DriftSampler, DriftSources
from hostcheck.watch.journal import Journal, entry_time
from hostcheck.watch.power import power_source, read_ups
from hostcheck.watch.probes import (
    DEFAULT_DNS_NAME,
    DEFAULT_TARGETS,
    DEFAULT_TIMEOUT_S,
    NetworkProber,
    answered,
    parse_targets,
)
from hostcheck.watch.xid import FALLEN_OFF_XID, classify_line, pci_slot

BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
CLOCK_JUMP_S = 2.0
PRUNE_EVERY_S = 3600.0
SAME_LOSS_S = 300.0  # an unnumbered "fallen off the bus" this soon after Xid 79 of the GPU repeats it
THROTTLE_WATCHED = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)
DEFAULT_INTERVAL_S = 60.0
MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 3600.0
CONSECUTIVE_GRACE = 2.0  # two samples at most this many intervals apart are consecutive
MIN_PROBE_EVERY_S = 300.0  # the forwarded-port check: at most one every 5 minutes
MAX_PROBE_PORTS = 8
PROBE_TIMEOUT_S = 10.0


CONTAINER_MARK = Path("/run/systemd/container")
# Container managers that give each container boot a boot id of its own, over the kernel's
# (systemd-nspawn's setup_boot_id(), LXC's lxc_setup_boot_id()): the container's journal tells
# its boots apart by it, so the recorder keys boots the same way.
OWN_BOOT_ID_MANAGERS = frozenset({"systemd-nspawn", "lxc", "lxc-libvirt"})


def read_boot_id(path: Path = BOOT_ID_PATH, container_mark: Path = CONTAINER_MARK,
                 journal_boot: str | None = None) -> str:
    """The running boot's id as the journal has it (journald stamps each entry with the
    ``_BOOT_ID`` it reads from ``/proc/sys/kernel/random/boot_id`` in its own, unsandboxed view).

    On a machine that is not a container that file is the kernel's and reads the same in any
    unit. In a container it can differ: the manager mounts the container's own id over it, and a
    unit under ``ProtectKernelTunables=yes`` gets ``/proc/sys`` mounted afresh without that
    mount, so it reads the host kernel's id. ``journal_boot`` is the newest boot in the system
    journal: where it differs from what this process reads, this process's view is the hidden
    one, and the journal's is taken. A container whose manager gives no boot id of its own shares
    the kernel's across its reboots, so there the start time of its PID 1 is added: each
    container boot gets a key of its own (its journal cannot tell those boots apart; the
    recorder's own stop records then do)."""
    try:
        boot_id = path.read_text(encoding="ascii").strip().replace("-", "")
    except OSError:
        return journal_boot or "unknown"
    try:
        manager = container_mark.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return boot_id  # not a container
    if journal_boot and journal_boot != boot_id:
        return journal_boot
    if manager in OWN_BOOT_ID_MANAGERS:
        return boot_id
    try:
        fields = Path("/proc/1/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return f"{boot_id}.{fields[19]}"  # field 22 of stat: start time after the kernel booted
    except (OSError, IndexError):
        return boot_id


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
        self.nvml = config.nvml
        self.nvml_seen = False
        self.gpu_out_of_service: str | None = None  # the Xid this boot whose catalogue action is a GPU reset or reboot
        self.fallen_off_at: dict[str, float] = {}  # PCI slot -> when its numbered Xid 79 was logged
        self.last_throttle: dict[str, list[str]] = {}
        self.counters: dict[int, tuple[float, float | None, float | None]] = {}  # gpu -> (boottime, thermal, power)
        self.ecc: dict[int, tuple[int, int]] = {}
        self.public_address: str | None = None
        self.cgnat: str | None = None
        self.journal_state: str | None = None
        self.states: dict[str, Any] = {}  # last recorded state per watched source (power, UPS)
        self.unwritten: list[tuple[float, str]] = []
        self.samples_written = 0
        self.prev: tuple[float, float, float] | None = None
        last = self.writer.last_sample()
        if last is not None and last.boot_id == self.boot_id:
            # The same boot as the last sample written: a clock step or suspend while the
            # recorder was stopped is seen at the first sample.
            self.prev = (last.t, last.mono, last.boottime)
        self.last_prune_mono: float | None = None
        self.next_probe_mono: float | None = None
        self.drift = DriftSampler(config.drift, config.drift_every_s)
        self.count = 0

    # ------------------------------------------------------------------ small guarded writes

    def _event(self, kind: str, detail: dict[str, Any], t: float | None = None) -> None:
        """An event seen now (``t`` None: it carries the boot clock), or one read from a log
        (``t``: the log's own time)."""
        seen_now = t is None
        event = Event(self.clocks.wall() if t is None else t, kind, self.boot_id, detail,
                      self.clocks.boottime() if seen_now else None)
        try:
            self.writer.add_event(event)
        except sqlite3.Error as exc:
            self.unwritten.append((self.clocks.wall(), f"event {kind}: {exc}"))

    def _state(self, source: str, state: Any, kind: str, detail: dict[str, Any]) -> None:
        """Record ``detail`` as a ``kind`` event when ``source``'s state differs from the last one
        recorded in this run (the first reading is recorded too: it says where things started)."""
        if self.states.get(source, object()) != state:
            previous = self.states.get(source)
            self.states[source] = state
            self._event(kind, {**detail, "previous": previous})

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
            t = entry_time(entry) or now
            if kind == "xid" and self._repeats_xid_79(detail, t):
                continue
            if kind == "xid" and self.boot_id.startswith(str(entry.get("_BOOT_ID", self.boot_id))):
                if detail.get("effect") == "out_of_service":
                    self.gpu_out_of_service = f"Xid {detail.get('code')} ({detail.get('immediate')})"
                elif detail.get("code") == 154 and detail.get("immediate") == "IGNORE":
                    self.gpu_out_of_service = None  # the driver says no recovery action is needed any more
            self._event(kind, detail, t=t)
        if new_cursor and new_cursor != cursor:
            self.writer.set_meta("kernel_cursor", new_cursor)

    def _repeats_xid_79(self, detail: dict[str, Any], t: float) -> bool:
        """An unnumbered "fallen off the bus" line right after the numbered Xid 79 of the same GPU
        is the same loss told twice (older drivers print both): counted once."""
        if detail.get("code") != FALLEN_OFF_XID:
            return False
        slot = pci_slot(str(detail.get("bus") or ""))
        if detail.get("numbered", True):
            self.fallen_off_at[slot] = t
            return False
        recent = [at for s, at in self.fallen_off_at.items() if slot in ("", s)]
        return any(0 <= t - at <= SAME_LOSS_S for at in recent)

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

    def _gpu(self, boottime: float) -> tuple[bool | None, dict[str, Any]]:
        from hostcheck.collectors.gpu import load_nvml, nvml_facts, recorder_counters

        if self.nvml is None:
            self.nvml = load_nvml()
        if isinstance(self.nvml, Unknown):
            return (False if self.nvml_seen else None), {"nvml": self.nvml.reason}
        facts = nvml_facts(self.nvml)
        if not facts["nvml"]["available"]:
            if self.nvml_seen:
                self._nvml_state("nvml", facts["nvml"]["reason"], {})
            return (False if self.nvml_seen else None), {"nvml": facts["nvml"]["reason"]}
        self.nvml_seen = True
        self._nvml_state("nvml", None, {})
        devices = facts["devices"]
        if isinstance(devices, Unknown):
            self._nvml_state("devices", devices.reason, {})
            return False, {"nvml": devices.reason}
        self._nvml_state("devices", None, {})
        try:
            counters = recorder_counters(self.nvml)
        except Exception as exc:  # the extra counters must never fail the GPU's sample
            counters = Unknown(f"{type(exc).__name__}: {exc}")
        extra = {} if isinstance(counters, Unknown) else {row["index"]: row for row in counters}
        ok = self.gpu_out_of_service is None
        failure = None if ok else f"out of service since {self.gpu_out_of_service} (NVIDIA's catalogue: reset the GPU or reboot)"
        readings = []
        for dev in devices:
            lost = [k for k, v in dev.items() if isinstance(v, Unknown) and "lost" in v.reason]
            self._nvml_state(f"gpu:{dev['index']}", dev[lost[0]].reason if lost else None, {"gpu": dev["index"]})
            if lost:
                ok = False
                failure = failure or f"GPU {dev['index']}: {dev[lost[0]].reason}"
            reasons = dev.get("throttle_reasons")
            watched = sorted(set(reasons) & THROTTLE_WATCHED) if isinstance(reasons, list) else []
            key = str(dev["index"])
            if watched != self.last_throttle.get(key, []):
                self._event("throttle", {"gpu": dev["index"], "reasons": watched})
                self.last_throttle[key] = watched
            reading = {
                "i": dev["index"],
                "temp": None if isinstance(dev.get("temperature_c"), Unknown) else dev.get("temperature_c"),
                "w": None if isinstance(dev.get("power_draw_w"), Unknown) else dev.get("power_draw_w"),
                "thr": watched,
            }
            if not lost:  # a lost GPU's counters cannot be read; its loss is the event
                reading.update(self._violations(dev, extra.get(dev["index"], {}), boottime))
                self._ecc(dev["index"], extra.get(dev["index"], {}))
            readings.append(reading)
        return ok, {"gpus": readings, **({"nvml": failure} if failure else {})}

    def _nvml_state(self, source: str, error: str | None, detail: dict[str, Any]) -> None:
        """An NVML failure is recorded when it starts and when it ends, not every sample."""
        key = f"nvml:{source}"
        if self.states.get(key) != error:
            previous = self.states.get(key)
            self.states[key] = error
            self._event("nvml", {**detail, "error": error, "previous": previous})

    def _violations(self, dev: dict[str, Any], extra: dict[str, Any], boottime: float) -> dict[str, Any]:
        """The increase of NVML's thermal and power violation counters since the previous sample
        (``th``, ``pw`` seconds) and the time between the two reads (``span``). Left out (None)
        when the previous read is not the previous sample of this boot, or a counter went back."""
        index = int(dev["index"])
        thermal = dev.get("thermal_slowdown")
        th_total = float(thermal["total"]) if isinstance(thermal, dict) and isinstance(thermal.get("total"), (int, float)) else None
        pw = extra.get("power_violation_s")
        pw_total = float(pw) if isinstance(pw, (int, float)) else None
        previous = self.counters.get(index)
        self.counters[index] = (boottime, th_total, pw_total)
        if previous is None:
            return {}
        span = boottime - previous[0]
        if not 0 < span <= self.config.interval_s * CONSECUTIVE_GRACE + GRACE_EXTRA_S:
            return {}

        def delta(now: float | None, before: float | None) -> float | None:
            return None if now is None or before is None or now < before else round(min(now - before, span), 3)

        th, pwd = delta(th_total, previous[1]), delta(pw_total, previous[2])
        if th is None and pwd is None:
            return {}
        return {"th": th, "pw": pwd, "span": round(span, 3)}

    def _ecc(self, index: int, extra: dict[str, Any]) -> None:
        corrected, uncorrected = extra.get("ecc_corrected"), extra.get("ecc_uncorrected")
        if not isinstance(corrected, int) or not isinstance(uncorrected, int):
            # No ECC counts (GeForce cards have none), or NVML could not read them: said once.
            why = corrected.reason if isinstance(corrected, Unknown) else "NVML gave no ECC counts"
            self._state(f"ecc:{index}", "none", "ecc", {"gpu": index, "available": False, "reason": why})
            return
        before = self.ecc.get(index)
        self.ecc[index] = (corrected, uncorrected)
        if before is None or (corrected, uncorrected) == before:
            return
        # Volatile counts start again at a driver reload: a drop is a new start, not new errors.
        new_c = corrected - before[0] if corrected >= before[0] else corrected
        new_u = uncorrected - before[1] if uncorrected >= before[1] else uncorrected
        self._event("ecc", {"gpu": index, "corrected": corrected, "uncorrected": uncorrected,
                            "corrected_new": new_c, "uncorrected_new": new_u})

    def _power(self) -> None:
        source = power_source(self.config.power_supply_dir)
        if isinstance(source, Unknown):
            self._state("power_source", source.reason, "power_source", {"readable": False, "reason": source.reason})
            return
        if not source["battery_present"]:
            self._state("power_source", "no battery", "power_source",
                        {"readable": True, "battery_present": False, "on_ac": source["on_ac"]})
            return
        state = "ac" if source["on_ac"] else ("battery" if source["on_ac"] is False else "unknown")
        self._state("power_source", state, "power_source",
                    {"readable": True, "battery_present": True, "on": state, "batteries": source["batteries"]})

    def _ups(self) -> None:
        readings = read_ups(self.config.upsc_command)
        if isinstance(readings, Unknown):
            # Recorded once per reason: NUT not installed, upsd not running, no UPS configured.
            self._state("ups", readings.reason, "ups", {"available": False, "reason": readings.reason})
            return
        for r in readings:
            self._state(f"ups:{r.name}", r.status, "ups",
                        {"available": True, "ups": r.name, "status": r.status, "on_battery": r.on_battery, **r.values})

    def _stun(self) -> None:
        if not self.config.stun_servers or self.count % max(1, self.config.stun_every):
            return
        from hostcheck.netprobe.cgnat import cgnat_verdict, local_address_signal, stun_signal
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
            # CGNAT re-check: the mapped address against the address this host sends from
            # (a shared RFC 6598 address on either side is carrier-grade NAT).
            signals = [stun_signal(result.mapped, result.local, spec, result.error, self.config.public_ranges),
                       local_address_signal(result.local[0] if result.local else None, self.config.public_ranges)]
            verdict = str(cgnat_verdict(signals))
            if verdict != self.cgnat:
                self._event("cgnat", {"verdict": verdict, "previous": self.cgnat,
                                      "evidence": [sig["evidence"] for sig in signals]})
                self.cgnat = verdict
            return

    def _inbound(self, mono: float) -> None:
        """The forwarded ports, checked from outside by the owner's probe server, at most once
        every ``probe_every_s`` (opt-in; each check is one HTTPS request and one connection per port)."""
        if self.config.probe_url is None or self.config.probe_token is None:
            return
        if self.next_probe_mono is not None and mono < self.next_probe_mono:
            return
        self.next_probe_mono = mono + self.config.probe_every_s
        from hostcheck.netprobe.probe_client import request_probe

        answer = request_probe(self.config.probe_url, self.config.probe_token, self.config.probe_ports,
                               timeout=PROBE_TIMEOUT_S, fingerprint=self.config.probe_fingerprint)
        ports = [{"port": p["port"], "proto": p["proto"], "result": str(p["result"]), "detail": p["detail"]}
                 for p in answer.get("ports", [])]
        self._event("inbound", {"probed": bool(answer.get("probed")), "reason": answer.get("reason"), "ports": ports})

    def _clocks(self, wall: float, mono: float, boot: float) -> None:
        if self.prev is not None:
            p_wall, p_mono, p_boot = self.prev
            suspended = (boot - p_boot) - (mono - p_mono)
            if suspended > CLOCK_JUMP_S:
                self._event("suspend", {"seconds": round(suspended, 1), "from": p_wall + (mono - p_mono)})
            step = (wall - p_wall) - (boot - p_boot)
            if abs(step) > CLOCK_JUMP_S:
                # Recorded, never used to order or measure: the analysis goes by the boot clock.
                self._event("clock_jump", {"step_s": round(step, 3), "from": p_wall + (boot - p_boot), "to": wall})
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
            gpu_ok, gpu_detail = self._gpu(boot)
        except sqlite3.Error:
            raise
        except Exception as exc:
            gpu_ok, gpu_detail = (False if self.nvml_seen else None), {"nvml": f"{type(exc).__name__}: {exc}"}
        for name, guarded in (("stun", self._stun), ("power", self._power), ("ups", self._ups),
                              ("inbound", lambda: self._inbound(mono)),
                              ("drift", lambda: self.drift.sample(mono, self._state))):
            try:
                guarded()
            except sqlite3.Error:
                raise
            except Exception as exc:  # a part that breaks is a reason, never the end of the recording
                self.log(f"{name}: {type(exc).__name__}: {exc}")
        sample = Sample(wall, mono, boot, self.boot_id, self.config.interval_s, answered(net), len(net), gpu_ok,
                        {"net": net, **gpu_detail})
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
                    self._event("retention", {"deleted_rows": deleted, "max_age_days": self.config.max_age_days,
                                              "max_bytes": self.config.max_bytes})

    def begin(self) -> None:
        """What a run does before its first sample: say it started, read the boot list."""
        self._event("recorder_start", {"interval_s": self.config.interval_s, "targets": [t.label for t in self.targets]})
        try:
            self._sync_boots()
        except sqlite3.Error as exc:
            self.log(f"boot list not recorded: {exc}")

    def finish(self) -> None:
        """What a run does as it stops: say why (systemd's SIGTERM at shutdown is a clean stop)."""
        try:
            self._event("recorder_stop", {"reason": self.stop_reason, "samples": self.samples_written})
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
