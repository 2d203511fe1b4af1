"""Live power readings over one bounded window: the GPUs through NVML, the CPU package through
RAPL, and a laptop's battery discharge.

Nothing here changes the machine; every reading is taken twice (start and end of the window) or
sampled during it, and anything that cannot be read is an ``Unknown`` with its reason. The sysfs
roots and the NVML module are parameters so tests can point them at recorded stand-ins.
"""

from __future__ import annotations

import math
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import read_text
from hostcheck.collectors.gpu import ERR_NOT_SUPPORTED, init_failure_reason, load_nvml
from hostcheck.facts import Unknown

POWERCAP = Path("/sys/class/powercap")
POWER_SUPPLY = Path("/sys/class/power_supply")
MAX_SAMPLE_S = 60.0
POLL_S = 0.2
# A reading above this is a broken sensor or a hostile tree, not a machine hostcheck judges.
MAX_PLAUSIBLE_W = 20_000.0


@dataclass(frozen=True)
class Reading:
    """Average watts over the window and how they were obtained, or Unknown and why."""

    watts: float | Unknown
    how: str


@dataclass(frozen=True)
class PowerReadings:
    seconds: float
    gpus: list[Reading] | Unknown
    cpu_package: Reading
    battery: Reading


def _plausible(watts: float, how: str) -> Reading:
    if not math.isfinite(watts) or not 0 <= watts <= MAX_PLAUSIBLE_W:
        reason = f"implausible reading {watts!r} W ({how})"
        return Reading(Unknown(reason), reason)
    return Reading(round(watts, 2), how)


def _unknown(reason: str) -> Reading:
    return Reading(Unknown(reason), reason)


# ----------------------------------------------------------------------------- RAPL


def energy_delta_uj(before: int, after: int, max_range_uj: int) -> int:
    """Energy between two readings of a counter that wraps to 0 after ``max_range_uj``."""
    if after >= before:
        return after - before
    return after + max_range_uj - before


def _read_int(path: Path) -> int | Unknown:
    try:
        # O_NONBLOCK and the regular-file check: a FIFO planted in a tree must not hang us.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return Unknown(f"{path} is not a regular file")
            text = fh.read(64).decode("ascii", "replace").strip()
    except PermissionError:
        return Unknown(
            f"{path} is readable by root only (Linux 5.10 and later, CVE-2020-8694): run as root to measure it"
        )
    except OSError as exc:
        return Unknown(f"cannot read {path}: {exc.strerror or exc}")
    if not text.isascii() or not text.isdigit():
        return Unknown(f"{path} does not hold a counter: {text[:40]!r}")
    return int(text)


def rapl_packages(root: Path = POWERCAP) -> list[Path] | Unknown:
    """The package-level RAPL zones (``intel-rapl:N``, also used by AMD), not their subzones."""
    try:
        names = sorted(p.name for p in root.iterdir())
    except OSError as exc:
        return Unknown(
            f"no powercap interface at {root} ({exc.strerror or exc}): no RAPL driver, a VM, or a container"
        )
    zones = []
    for name in names:
        if not name.startswith("intel-rapl:") or name.count(":") != 1:
            continue
        label = read_text(root / name / "name", limit=64)
        if not isinstance(label, Unknown) and label.strip().startswith("package"):
            zones.append(root / name)
    if not zones:
        return Unknown(f"no RAPL package zone under {root} (CPU without RAPL, a VM, or a container)")
    return zones


class _RaplWindow:
    def __init__(self, root: Path) -> None:
        self.zones = rapl_packages(root)
        self.start: list[int] | Unknown = Unknown("not started")
        self.ranges: list[int] | Unknown = Unknown("not started")

    def begin(self) -> None:
        if isinstance(self.zones, Unknown):
            return
        start, ranges = [], []
        for zone in self.zones:
            value, top = _read_int(zone / "energy_uj"), _read_int(zone / "max_energy_range_uj")
            if isinstance(value, Unknown):
                self.start = value
                return
            if isinstance(top, Unknown):
                self.start = top
                return
            start.append(value)
            ranges.append(top)
        self.start, self.ranges = start, ranges

    def end(self, elapsed: float) -> Reading:
        if isinstance(self.zones, Unknown):
            return _unknown(self.zones.reason)
        if isinstance(self.start, Unknown) or isinstance(self.ranges, Unknown):
            return _unknown(self.start.reason if isinstance(self.start, Unknown) else "no RAPL range")
        total_uj = 0
        for zone, before, top in zip(self.zones, self.start, self.ranges, strict=True):
            after = _read_int(zone / "energy_uj")
            if isinstance(after, Unknown):
                return _unknown(after.reason)
            if after > top or before > top:
                return _unknown(f"{zone / 'energy_uj'} is above its max_energy_range_uj {top}")
            total_uj += energy_delta_uj(before, after, top)
        names = ", ".join(z.name for z in self.zones)
        return _plausible(total_uj / 1e6 / elapsed, f"RAPL package energy counter over {elapsed:.1f} s ({names})")


# ----------------------------------------------------------------------------- battery


def battery_discharge(root: Path = POWER_SUPPLY) -> Reading:
    """Watts the batteries deliver now; only meaningful while discharging (on AC they charge or idle)."""
    try:
        names = sorted(p.name for p in root.iterdir() if p.name.startswith("BAT"))
    except OSError as exc:
        return _unknown(f"cannot list {root}: {exc.strerror or exc}")
    if not names:
        return _unknown("no battery (BAT*) in " + str(root))
    total, parts, statuses = 0.0, [], []
    for name in names:
        base = root / name
        status = read_text(base / "status", limit=64)
        status_text = status.strip() if not isinstance(status, Unknown) else "unknown"
        statuses.append(f"{name} {status_text}")
        if status_text != "Discharging":
            continue
        power = _read_int(base / "power_now")
        if not isinstance(power, Unknown):
            total += power / 1e6
            parts.append(f"{name} power_now")
            continue
        current, voltage = _read_int(base / "current_now"), _read_int(base / "voltage_now")
        if isinstance(current, Unknown) or isinstance(voltage, Unknown):
            return _unknown(f"{name} is discharging but reports neither power_now nor current_now and voltage_now")
        total += current * voltage / 1e12
        parts.append(f"{name} current_now x voltage_now")
    if not parts:
        return _unknown(
            "not on battery (" + ", ".join(statuses) + "): discharge is the machine's draw only when unplugged"
        )
    return _plausible(total, "battery discharge now (" + ", ".join(parts) + ")")


# ----------------------------------------------------------------------------- NVML


def _nvml_value(nvml: Any, fn_name: str, *args: Any) -> Any:
    fn = getattr(nvml, fn_name, None)
    if fn is None:
        return Unknown(f"this nvidia-ml-py has no {fn_name}")
    try:
        return fn(*args)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == ERR_NOT_SUPPORTED:
            return Unknown(f"{fn_name} is not supported by this GPU/driver")
        return Unknown(f"{fn_name} failed: {exc}")


class _GpuWindow:
    def __init__(self, nvml: Any, handle: Any, index: int) -> None:
        self.nvml, self.handle, self.index = nvml, handle, index
        self.energy_start: Any = Unknown("not started")
        self.samples: list[float] = []
        self.errors: list[str] = []

    def begin(self) -> None:
        self.energy_start = _nvml_value(self.nvml, "nvmlDeviceGetTotalEnergyConsumption", self.handle)
        self.poll()

    def poll(self) -> None:
        value = _nvml_value(self.nvml, "nvmlDeviceGetPowerUsage", self.handle)
        if isinstance(value, Unknown):
            self.errors.append(value.reason)
        else:
            self.samples.append(int(value) / 1000)

    def end(self, elapsed: float) -> Reading:
        if not isinstance(self.energy_start, Unknown):
            after = _nvml_value(self.nvml, "nvmlDeviceGetTotalEnergyConsumption", self.handle)
            if not isinstance(after, Unknown) and int(after) >= int(self.energy_start):
                watts = (int(after) - int(self.energy_start)) / 1000 / elapsed
                return _plausible(watts, f"NVML total-energy counter over {elapsed:.1f} s (GPU {self.index})")
        if self.samples:
            watts = sum(self.samples) / len(self.samples)
            return _plausible(
                watts,
                f"NVML average power, mean of {len(self.samples)} readings over {elapsed:.1f} s (GPU {self.index})",
            )
        return _unknown(f"GPU {self.index}: " + (self.errors[0] if self.errors else "no power reading"))


def _gpu_windows(nvml: Any) -> list[_GpuWindow] | Unknown:
    count = _nvml_value(nvml, "nvmlDeviceGetCount")
    if isinstance(count, Unknown):
        return count
    windows = []
    for index in range(int(count)):
        handle = _nvml_value(nvml, "nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, Unknown):
            return Unknown(f"GPU {index}: {handle.reason}")
        windows.append(_GpuWindow(nvml, handle, index))
    return windows


# ----------------------------------------------------------------------------- the window


def sample_power(
    seconds: float,
    *,
    nvml: Any = None,
    powercap_root: Path = POWERCAP,
    supply_root: Path = POWER_SUPPLY,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PowerReadings:
    """Sample every source over the same window of ``seconds`` (bounded to MAX_SAMPLE_S)."""
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_SAMPLE_S:
        raise ValueError(f"the sampling window must be above 0 and at most {MAX_SAMPLE_S:g} s, not {seconds}")
    nvml = load_nvml() if nvml is None else nvml
    gpus: list[_GpuWindow] | Unknown
    started_nvml = False
    if isinstance(nvml, Unknown):
        gpus = Unknown(f"no NVML: {nvml.reason}")
    else:
        try:
            nvml.nvmlInit()
            started_nvml = True
            gpus = _gpu_windows(nvml)
        except nvml.NVMLError as exc:
            gpus = Unknown(f"no NVML: {init_failure_reason(exc)}")
    try:
        rapl = _RaplWindow(powercap_root)
        start = clock()
        rapl.begin()
        if not isinstance(gpus, Unknown):
            for window in gpus:
                window.begin()
        # Nothing that counts over time (no GPU, RAPL unreadable): no window to wait for.
        idle_window = isinstance(gpus, Unknown) and isinstance(rapl.start, Unknown)
        deadline = start if idle_window else start + seconds
        while (left := deadline - clock()) > 0:
            sleep(min(POLL_S, left))
            if not isinstance(gpus, Unknown):
                for window in gpus:
                    window.poll()
        elapsed = max(clock() - start, 1e-3)
        cpu = rapl.end(elapsed)
        gpu_readings = gpus if isinstance(gpus, Unknown) else [w.end(elapsed) for w in gpus]
    finally:
        if started_nvml and not isinstance(nvml, Unknown):
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError:
                pass
    return PowerReadings(
        seconds=round(elapsed, 3), gpus=gpu_readings, cpu_package=cpu, battery=battery_discharge(supply_root)
    )
