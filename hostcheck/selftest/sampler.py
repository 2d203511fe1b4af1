"""NVML readings for the self-test: each GPU's limits once, then one :class:`Sample` a second
while the load runs. Read-only: NVML is asked, never told (no clock, power or persistence
setting is touched). The NVML module is a parameter (pynvml, or the suite's stand-in)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hostcheck.selftest.results import GpuLoad, Sample

GPU_IS_LOST = 15
# Queries nvidia-ml-py renamed, by their older name (bindings before 12.535 know only that one).
OLDER_NAMES = {"nvmlDeviceGetCurrentClocksEventReasons": "nvmlDeviceGetCurrentClocksThrottleReasons"}


class NvmlGpu:
    """One GPU's NVML handle, found by its PCI bus id (the CUDA and NVML orders can differ)."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle
        self.lost = False

    def read(self, name: str, *args: Any, scale: float = 1.0) -> Any:
        """One query; None when it fails (a lost GPU is remembered: every later read is None)."""
        if self.lost:
            return None
        query = getattr(self.nvml, name, None) or getattr(self.nvml, OLDER_NAMES.get(name, ""), None)
        if query is None:
            return None  # a binding older than the query
        try:
            value = query(self.handle, *args)
        except self.nvml.NVMLError as exc:
            if getattr(exc, "value", None) == GPU_IS_LOST:
                self.lost = True
            return None
        if scale != 1.0 and isinstance(value, (int, float)):
            return value / scale
        return value

    def limits(self, index: int) -> GpuLoad:
        nvml = self.nvml
        load = GpuLoad(index=index)
        load.max_sm_clock_mhz = self.read("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM)
        load.power_limit_w = self.read("nvmlDeviceGetEnforcedPowerLimit", scale=1000.0)
        load.default_power_limit_w = self.read("nvmlDeviceGetPowerManagementDefaultLimit", scale=1000.0)
        load.slowdown_c = self.read("nvmlDeviceGetTemperatureThreshold", nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
        load.ecc_before = self.ecc_uncorrected()
        return load

    def ecc_uncorrected(self) -> int | None:
        nvml = self.nvml
        return self.read("nvmlDeviceGetTotalEccErrors", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)

    def sample(self, t: float) -> Sample:
        nvml = self.nvml
        return Sample(
            t=round(t, 2),
            sm_clock_mhz=self.read("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            power_w=self.read("nvmlDeviceGetPowerUsage", scale=1000.0),
            temperature_c=self.read("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
            reasons=self.read("nvmlDeviceGetCurrentClocksEventReasons"),
            lost=self.lost,
        )

    def link(self) -> tuple[tuple[int | None, int | None], tuple[int | None, int | None]]:
        """((negotiated, maximum) PCIe generation, (negotiated, maximum) width)."""
        return ((self.read("nvmlDeviceGetCurrPcieLinkGeneration"), self.read("nvmlDeviceGetMaxPcieLinkGeneration")),
                (self.read("nvmlDeviceGetCurrPcieLinkWidth"), self.read("nvmlDeviceGetMaxPcieLinkWidth")))

    def compute_processes(self) -> list[int] | None:
        """The pids of the compute processes on this GPU (None: NVML could not say)."""
        found = self.read("nvmlDeviceGetComputeRunningProcesses")
        if found is None:
            return None
        return [int(getattr(p, "pid", 0)) for p in list(found)[:64]]


def _bus(value: Any) -> str:
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    return text.lower()[-12:]  # "00000000:01:00.0" and "0000:01:00.0" both end in "0000:01:00.0"


def open_gpus(nvml: Any, bus_ids: list[str]) -> list[NvmlGpu | None] | str:
    """An NVML handle per CUDA device (matched by PCI bus id), or why NVML cannot be used."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return f"NVML did not start: {exc}"
    by_bus: dict[str, Any] = {}
    try:
        for index in range(min(int(nvml.nvmlDeviceGetCount()), 64)):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            by_bus[_bus(nvml.nvmlDeviceGetPciInfo(handle).busId)] = handle
    except nvml.NVMLError as exc:
        return f"NVML could not list the GPUs: {exc}"
    return [NvmlGpu(nvml, by_bus[_bus(bus)]) if _bus(bus) in by_bus else None for bus in bus_ids]


class Ticker:
    """Calls ``take(t)`` at most once a ``period`` of the clock, from the load's own loop: the
    self-test is one thread, so a sample is taken between two kernel batches."""

    def __init__(self, clock: Callable[[], float], take: Callable[[float], None], period: float = 1.0) -> None:
        self.clock = clock
        self.take = take
        self.period = period
        self.start = clock()
        self.next = self.start

    def poll(self) -> None:
        now = self.clock()
        if now >= self.next:
            self.take(now - self.start)
            self.next = max(self.next + self.period, now)
