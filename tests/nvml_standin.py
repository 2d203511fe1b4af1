"""NVML stand-in: NVML needs an NVIDIA GPU and driver, which CI machines do not have.

:class:`FakeNvml` answers the queries a scenario defines with the values a real driver returns
(shapes recorded from real devices: :func:`laptop_3080ti` is the reference laptop,
:func:`server_a100` a data-centre card) and raises real pynvml error objects
(NVMLError(code) -> NVMLError_NotSupported ...), so the collectors' error handling meets the
exceptions it gets from the driver."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml as real_nvml

MIB = 1024 * 1024


class FakeNvml:
    NVMLError = real_nvml.NVMLError

    def __init__(
        self,
        gpus: list[dict[str, Any]],
        init_error: int | None = None,
        driver: str = "580.95.05",
        cuda: int = 13020,
        nvml_version: str = "13.580.95.05",
    ) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.system = {
            "nvmlSystemGetDriverVersion": driver,
            "nvmlSystemGetCudaDriverVersion_v2": cuda,
            "nvmlSystemGetNVMLVersion": nvml_version,
        }
        self.calls: list[tuple[Any, ...]] = []
        self.lost: set[int] = set()

    def nvmlInit(self) -> None:
        self.calls.append(("nvmlInit",))
        if self.init_error is not None:
            raise real_nvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append(("nvmlShutdown",))

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return self._answer(index, "nvmlDeviceGetHandleByIndex", ()) or index

    def __getattr__(self, name: str) -> Any:
        if name.startswith("NVML_"):
            return getattr(real_nvml, name)
        if name in self.system:
            return lambda: self.system[name]
        if name.startswith("nvmlDeviceGet"):
            return lambda handle, *args: self._answer(handle, name, args)
        raise AttributeError(name)

    def _answer(self, handle: int, name: str, args: tuple[Any, ...]) -> Any:
        self.calls.append((name, handle, *args))
        gpu_spec = self.gpus[handle]
        if handle in self.lost or gpu_spec.get("lost_at") == name:
            self.lost.add(handle)
            raise real_nvml.NVMLError(real_nvml.NVML_ERROR_GPU_IS_LOST)
        if name == "nvmlDeviceGetHandleByIndex":
            return None
        value = gpu_spec[name]  # a query the scenario does not define is a test bug: KeyError
        if isinstance(value, Fail):
            raise real_nvml.NVMLError(value.code)
        return value


class Fail:
    def __init__(self, code: int) -> None:
        self.code = code


NOT_SUPPORTED = Fail(real_nvml.NVML_ERROR_NOT_SUPPORTED)


def laptop_3080ti() -> dict[str, Any]:
    """A GeForce RTX 3080 Ti Laptop GPU capped at 45 W of its 125 W default (35-150 W allowed)."""
    return {
        "nvmlDeviceGetName": "NVIDIA GeForce RTX 3080 Ti Laptop GPU",
        "nvmlDeviceGetUUID": "GPU-6c3d8a0e-5b1f-2f44-91e1-4f3c2a7d9b10",
        "nvmlDeviceGetSerial": NOT_SUPPORTED,
        "nvmlDeviceGetPciInfo": SimpleNamespace(busId="00000000:01:00.0"),
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=16384 * MIB, used=1093 * MIB, free=15291 * MIB),
        "nvmlDeviceGetEnforcedPowerLimit": 45000,
        "nvmlDeviceGetPowerManagementDefaultLimit": 125000,
        "nvmlDeviceGetPowerManagementLimitConstraints": [35000, 150000],
        "nvmlDeviceGetPowerUsage": 38512,
        "nvmlDeviceGetTemperature": 81,
        "nvmlDeviceGetTemperatureThreshold": 98,
        "nvmlDeviceGetCurrPcieLinkGeneration": 1,
        "nvmlDeviceGetMaxPcieLinkGeneration": 4,
        "nvmlDeviceGetCurrPcieLinkWidth": 8,
        "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetEccMode": NOT_SUPPORTED,
        "nvmlDeviceGetPersistenceMode": 0,
        "nvmlDeviceGetDisplayActive": 0,
        "nvmlDeviceGetCurrentClocksEventReasons": 0x4 | 0x40,
        "nvmlDeviceGetMigMode": NOT_SUPPORTED,
        # 30 minutes of thermal slowdown counted (nvmlViolationTime_t: violationTime in ns)
        "nvmlDeviceGetViolationStatus": SimpleNamespace(referenceTime=0, violationTime=1800 * 10**9),
        "nvmlDeviceGetArchitecture": 7,  # NVML_DEVICE_ARCH_AMPERE
        "nvmlDeviceGetCudaComputeCapability": (8, 6),
    }


def server_a100(bus: str, uuid: str) -> dict[str, Any]:
    return {
        "nvmlDeviceGetName": "NVIDIA A100-SXM4-80GB",
        "nvmlDeviceGetUUID": uuid,
        "nvmlDeviceGetSerial": "1322721045678",
        "nvmlDeviceGetPciInfo": SimpleNamespace(busId=bus.encode()),  # old bindings return bytes
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=81920 * MIB, used=4 * MIB, free=81916 * MIB),
        "nvmlDeviceGetEnforcedPowerLimit": 400000,
        "nvmlDeviceGetPowerManagementDefaultLimit": 400000,
        "nvmlDeviceGetPowerManagementLimitConstraints": [100000, 400000],
        "nvmlDeviceGetPowerUsage": 61234,
        "nvmlDeviceGetTemperature": 33,
        "nvmlDeviceGetTemperatureThreshold": 92,
        "nvmlDeviceGetCurrPcieLinkGeneration": 4,
        "nvmlDeviceGetMaxPcieLinkGeneration": 4,
        "nvmlDeviceGetCurrPcieLinkWidth": 16,
        "nvmlDeviceGetMaxPcieLinkWidth": 16,
        "nvmlDeviceGetEccMode": [1, 1],
        "nvmlDeviceGetPersistenceMode": 1,
        "nvmlDeviceGetDisplayActive": 0,
        "nvmlDeviceGetCurrentClocksEventReasons": 0x1,
        "nvmlDeviceGetMigMode": [1, 1],
        "nvmlDeviceGetViolationStatus": SimpleNamespace(referenceTime=0, violationTime=0),
        "nvmlDeviceGetArchitecture": 7,
        "nvmlDeviceGetCudaComputeCapability": (8, 0),
    }
