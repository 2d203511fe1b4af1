"""Stand-ins for what the self-test touches and these machines lack: the CUDA driver (a C
library built from fake_libcuda.c, loaded through the real ctypes layer), NVML readings over
time (recorded shapes), and the facts of the preflight (the recorded snapshots).

The NVML shapes say what they represent. Clocks, limits and thresholds are the values NVML
reports for those cards (the reference laptop's 45 W cap of its 125 W default is recorded in
tests/snapshots/); how they move under a minute of load is built to the shape such a card
shows, not recorded sample by sample."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml as real_nvml

from tests.nvml_standin import NOT_SUPPORTED, Fail, FakeNvml

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_libcuda.c"
SNAPSHOTS = HERE.parents[1] / "snapshots"

SW_POWER_CAP, SW_THERMAL, HW_THERMAL, GPU_IDLE = 0x4, 0x20, 0x40, 0x1


def build_fake_library(directory: Path, source: str, name: str) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler: scripts/test installs gcc")
    target = directory / name
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(target),
                    str(HERE / source)], check=True, timeout=60)
    return target


def build_fake_libcuda(directory: Path) -> Path:
    """The CUDA driver stand-in (fake_libcuda.c) as a shared library in ``directory``."""
    return build_fake_library(directory, SOURCE.name, "libcuda-standin.so")


def live(library: Path) -> dict[str, int]:
    """What the stand-in still holds: device allocations, pinned buffers, modules, contexts."""
    out = (ctypes.c_int * 4)()
    ctypes.CDLL(str(library)).hcfake_live(out)
    return {"device": out[0], "host": out[1], "modules": out[2], "contexts": out[3]}


class Series:
    """A reading that changes over the run: the n-th query of it answers values[n] (the last
    value once they run out)."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values


class RecordedNvml(FakeNvml):
    """FakeNvml whose answers may be Series, read one step further at each query."""

    def __init__(self, gpus: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(gpus, **kwargs)
        self.steps: dict[tuple[int, str], int] = {}

    def _answer(self, handle: int, name: str, args: tuple[Any, ...]) -> Any:
        spec = self.gpus[handle]
        value = spec.get(name)
        if isinstance(value, Series) and handle not in self.lost:
            step = self.steps.get((handle, name), 0)
            self.steps[(handle, name)] = step + 1
            current = value.values[min(step, len(value.values) - 1)]
            if isinstance(current, Fail):
                if current.code == real_nvml.NVML_ERROR_GPU_IS_LOST:
                    self.lost.add(handle)
                raise real_nvml.NVMLError(current.code)
            return current
        return super()._answer(handle, name, args)


def _common(bus: str, **over: Any) -> dict[str, Any]:
    spec = {
        "nvmlDeviceGetPciInfo": SimpleNamespace(busId=bus),
        "nvmlDeviceGetComputeRunningProcesses": [],
        "nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED,
        "nvmlDeviceGetCurrentClocksEventReasons": 0,
    }
    spec.update(over)
    return spec


def desktop_4090(bus: str = "00000000:01:00.0", **over: Any) -> dict[str, Any]:
    """A GeForce RTX 4090 in a server case: at full FMA load it sits at its 450 W limit (the
    software power cap is active, as on any card at its limit) and keeps about 2,600 of its
    3,105 MHz, at 60-66 °C of its 90 °C slowdown threshold."""
    return _common(
        bus,
        nvmlDeviceGetMaxClockInfo=3105,
        nvmlDeviceGetEnforcedPowerLimit=450000,
        nvmlDeviceGetPowerManagementDefaultLimit=450000,
        nvmlDeviceGetTemperatureThreshold=90,
        nvmlDeviceGetClockInfo=Series([2730, 2650, 2610, 2600]),
        nvmlDeviceGetPowerUsage=Series([431000, 449000, 448500]),
        nvmlDeviceGetTemperature=Series([60, 63, 65, 66]),
        nvmlDeviceGetCurrentClocksEventReasons=SW_POWER_CAP,
        nvmlDeviceGetCurrPcieLinkGeneration=4, nvmlDeviceGetMaxPcieLinkGeneration=4,
        nvmlDeviceGetCurrPcieLinkWidth=16, nvmlDeviceGetMaxPcieLinkWidth=16,
    ) | over


def laptop_capped(bus: str = "00000000:01:00.0") -> dict[str, Any]:
    """The reference laptop's RTX 3080 Ti Laptop GPU, capped at 45 W of its 125 W default: under
    load it holds the cap and runs near 900 of its 2,100 MHz, the software power cap active."""
    return _common(
        bus,
        nvmlDeviceGetMaxClockInfo=2100,
        nvmlDeviceGetEnforcedPowerLimit=45000,
        nvmlDeviceGetPowerManagementDefaultLimit=125000,
        nvmlDeviceGetTemperatureThreshold=98,
        nvmlDeviceGetClockInfo=Series([1200, 930, 900, 885]),
        nvmlDeviceGetPowerUsage=Series([44100, 45000, 44900]),
        nvmlDeviceGetTemperature=Series([62, 70, 74, 76]),
        nvmlDeviceGetCurrentClocksEventReasons=SW_POWER_CAP,
        nvmlDeviceGetCurrPcieLinkGeneration=4, nvmlDeviceGetMaxPcieLinkGeneration=4,
        nvmlDeviceGetCurrPcieLinkWidth=8, nvmlDeviceGetMaxPcieLinkWidth=16,
    )


def desktop_thermal(bus: str = "00000000:01:00.0") -> dict[str, Any]:
    """An RTX 3090 with a failing fan: its temperature climbs to its slowdown threshold (93 °C)
    and the thermal slowdown reasons come on."""
    return _common(
        bus,
        nvmlDeviceGetMaxClockInfo=2100,
        nvmlDeviceGetEnforcedPowerLimit=350000,
        nvmlDeviceGetPowerManagementDefaultLimit=350000,
        nvmlDeviceGetTemperatureThreshold=93,
        nvmlDeviceGetClockInfo=Series([1950, 1800, 1500, 1100]),
        nvmlDeviceGetPowerUsage=Series([340000, 300000, 250000]),
        nvmlDeviceGetTemperature=Series([80, 86, 90, 92]),
        nvmlDeviceGetCurrentClocksEventReasons=Series([SW_POWER_CAP, SW_THERMAL, SW_THERMAL | HW_THERMAL]),
        nvmlDeviceGetCurrPcieLinkGeneration=4, nvmlDeviceGetMaxPcieLinkGeneration=4,
        nvmlDeviceGetCurrPcieLinkWidth=16, nvmlDeviceGetMaxPcieLinkWidth=16,
    )


def riser_3060(bus: str = "00000000:01:00.0") -> dict[str, Any]:
    """An RTX 3060 on a mining riser: PCIe gen 3 at x1 of x16 (the link NVML reports)."""
    return desktop_4090(bus, nvmlDeviceGetMaxClockInfo=2100, nvmlDeviceGetEnforcedPowerLimit=170000,
                        nvmlDeviceGetPowerManagementDefaultLimit=170000, nvmlDeviceGetTemperatureThreshold=95,
                        nvmlDeviceGetClockInfo=Series([1890, 1850, 1830]),
                        nvmlDeviceGetPowerUsage=Series([165000, 169000]),
                        nvmlDeviceGetCurrPcieLinkGeneration=3, nvmlDeviceGetMaxPcieLinkGeneration=4,
                        nvmlDeviceGetCurrPcieLinkWidth=1, nvmlDeviceGetMaxPcieLinkWidth=16)


def lost_after(spec: dict[str, Any], readings: int) -> dict[str, Any]:
    """The same card falling off the bus after ``readings`` clock readings (NVML answers
    NVML_ERROR_GPU_IS_LOST from then on, as after Xid 79)."""
    lost = Fail(real_nvml.NVML_ERROR_GPU_IS_LOST)
    clocks = spec["nvmlDeviceGetClockInfo"].values
    return spec | {"nvmlDeviceGetClockInfo": Series([*(clocks * 10)[:readings], lost])}


XID_79 = "NVRM: Xid (PCI:0000:01:00): 79, pid=2211, name=python3, GPU has fallen off the bus."
