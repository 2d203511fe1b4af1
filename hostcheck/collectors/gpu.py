"""GPU facts: per-device NVML readings, and every PCI display adapter from sysfs.

NVML is reached through an object with pynvml's interface (the real module by default),
so tests can hand in a stand-in for the hardware that cannot exist on a CI machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import read_text
from hostcheck.fact_paths import fields
from hostcheck.facts import Unknown
from hostcheck.knowledge.gpu_models import arch_from_nvml

SECTION = "gpu"
TIMEOUT = 4

PCI_DEVICES = Path("/sys/bus/pci/devices")
MIB = 1024 * 1024
NOT_SUPPORTED = "not supported by this GPU/driver"

# nvml.h return codes; numeric so that an older binding need not define every name.
ERR_NOT_SUPPORTED = 3
ERR_NO_PERMISSION = 4
ERR_DRIVER_NOT_LOADED = 9
ERR_LIBRARY_NOT_FOUND = 12
ERR_FUNCTION_NOT_FOUND = 13
ERR_GPU_IS_LOST = 15
ERR_LIB_RM_VERSION_MISMATCH = 18

# nvmlClocksEventReason* bits, in nvml.h order.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x1022": "amd", "0x8086": "intel"}
IDENTITY_FIELDS = ("name", "uuid", "serial", "pci_bus_id")
DEVICE_FIELDS = tuple(name for name in fields("gpu.devices.*") if name != "index")
NVML_ARCH_UNKNOWN = 0xFFFFFFFF
NVML_PERF_POLICY_POWER = 0  # nvmlPerfPolicyType_t
NVML_PERF_POLICY_THERMAL = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0  # nvmlMemoryErrorType_t
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0  # nvmlEccCounterType_t: since the driver loaded
UPTIME = Path("/proc/uptime")

class _GpuLost(Exception):
    """The device fell off the bus during the query; its readings cannot be trusted. Not in
    hostcheck.errors: a signal inside this module, caught here, never raised out of it."""


def decode_throttle_reasons(mask: int) -> list[str]:
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = sum(bit for bit, _ in THROTTLE_REASONS)
    rest = mask & ~known
    names += [f"unknown_0x{1 << i:x}" for i in range(rest.bit_length()) if rest >> i & 1]
    return names


def cuda_version_string(version: int) -> str:
    """NVML's 13020 -> "13.2" (major*1000 + minor*10)."""
    return f"{version // 1000}.{version % 1000 // 10}"


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _map(value: Any, fn: Callable[[Any], Any]) -> Any:
    return value if isinstance(value, Unknown) else fn(value)


def _watts(milliwatts: int) -> float:
    return round(milliwatts / 1000, 1)


def _error_reason(exc: Exception, what: str) -> str:
    code = getattr(exc, "value", None)
    if code == ERR_NOT_SUPPORTED:
        return NOT_SUPPORTED
    if code == ERR_NO_PERMISSION:
        return f"NVML {what}: permission denied"
    if code == ERR_FUNCTION_NOT_FOUND:
        return f"NVML {what}: the installed driver is too old for this query"
    return f"NVML {what} failed: {exc}"


def _call(nvml: Any, fn_name: str, *args: Any) -> Any:
    """One NVML getter; expected failures become Unknown, a lost GPU raises _GpuLost."""
    fn = getattr(nvml, fn_name, None)
    if fn is None:
        return Unknown(f"this nvidia-ml-py has no {fn_name}")
    try:
        return fn(*args)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == ERR_GPU_IS_LOST:
            raise _GpuLost(
                f"GPU is lost (fell off the bus during {fn_name}); its readings are unusable"
            ) from exc
        return Unknown(_error_reason(exc, fn_name))


def _system_call(nvml: Any, fn_name: str) -> Any:
    try:
        return _call(nvml, fn_name)
    except _GpuLost as lost:
        return Unknown(str(lost))


def init_failure_reason(exc: Exception) -> str:
    code = getattr(exc, "value", None)
    if code == ERR_LIBRARY_NOT_FOUND:
        return "NVML library libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
    if code == ERR_DRIVER_NOT_LOADED:
        return "NVIDIA kernel driver is not loaded"
    if code == ERR_LIB_RM_VERSION_MISMATCH:
        return "NVML library and kernel driver versions differ (reboot after a driver update?)"
    if code == ERR_NO_PERMISSION:
        return "no permission to open the NVIDIA device files"
    return f"nvmlInit failed: {exc}"


def _device(nvml: Any, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index}
    try:
        _fill_device(nvml, index, out)
    except _GpuLost as lost:
        # Identity read before the loss stays (it names the lost card); measurements do not.
        for key in DEVICE_FIELDS:
            if key not in IDENTITY_FIELDS or key not in out:
                out[key] = Unknown(str(lost))
    return {"index": index, **{key: out[key] for key in DEVICE_FIELDS}}


def _fill_device(nvml: Any, index: int, out: dict[str, Any]) -> None:
    handle = _call(nvml, "nvmlDeviceGetHandleByIndex", index)
    if isinstance(handle, Unknown):
        out.update({key: handle for key in DEVICE_FIELDS})
        return
    out["name"] = _map(_call(nvml, "nvmlDeviceGetName", handle), _text)
    out["uuid"] = _map(_call(nvml, "nvmlDeviceGetUUID", handle), _text)
    out["serial"] = _map(_call(nvml, "nvmlDeviceGetSerial", handle), _text)
    pci = _call(nvml, "nvmlDeviceGetPciInfo", handle)
    out["pci_bus_id"] = _map(pci, lambda p: _text(p.busId))
    mem = _call(nvml, "nvmlDeviceGetMemoryInfo", handle)
    out["vram_total_mib"] = _map(mem, lambda m: int(m.total) // MIB)
    out["vram_used_mib"] = _map(mem, lambda m: int(m.used) // MIB)
    # The enforced cap is what the card obeys (it can sit below the configured limit on
    # laptops and under platform limits); the configured limit stands in where it is missing.
    enforced = _call(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)
    if isinstance(enforced, Unknown):
        enforced = _call(nvml, "nvmlDeviceGetPowerManagementLimit", handle)
    out["power_limit_w"] = _map(enforced, _watts)
    out["power_default_w"] = _map(_call(nvml, "nvmlDeviceGetPowerManagementDefaultLimit", handle), _watts)
    limits = _call(nvml, "nvmlDeviceGetPowerManagementLimitConstraints", handle)
    out["power_min_w"] = _map(limits, lambda mm: _watts(mm[0]))
    out["power_max_w"] = _map(limits, lambda mm: _watts(mm[1]))
    out["power_draw_w"] = _map(_call(nvml, "nvmlDeviceGetPowerUsage", handle), _watts)
    sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
    out["temperature_c"] = _call(nvml, "nvmlDeviceGetTemperature", handle, sensor)
    slowdown = getattr(nvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
    out["slowdown_temp_c"] = _call(nvml, "nvmlDeviceGetTemperatureThreshold", handle, slowdown)
    out["pcie_gen_current"] = _call(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle)
    out["pcie_gen_max"] = _call(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle)
    out["pcie_width_current"] = _call(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle)
    out["pcie_width_max"] = _call(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle)
    out["ecc_enabled"] = _map(_call(nvml, "nvmlDeviceGetEccMode", handle), lambda cp: cp[0] == 1)
    out["persistence_mode"] = _map(_call(nvml, "nvmlDeviceGetPersistenceMode", handle), lambda v: v == 1)
    out["display_active"] = _map(_call(nvml, "nvmlDeviceGetDisplayActive", handle), lambda v: v == 1)
    reasons = _call(nvml, "nvmlDeviceGetCurrentClocksEventReasons", handle)
    if isinstance(reasons, Unknown) and reasons.reason != NOT_SUPPORTED:
        reasons = _call(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", handle)  # pre-535 drivers
    out["throttle_reasons"] = _map(reasons, lambda mask: decode_throttle_reasons(int(mask)))
    out["thermal_slowdown"] = thermal_slowdown(
        _call(nvml, "nvmlDeviceGetViolationStatus", handle, NVML_PERF_POLICY_THERMAL))
    out["mig_mode"] = _map(_call(nvml, "nvmlDeviceGetMigMode", handle), lambda cp: cp[0] == 1)
    out["architecture"] = _map(_call(nvml, "nvmlDeviceGetArchitecture", handle), architecture_name)
    out["compute_capability"] = _map(
        _call(nvml, "nvmlDeviceGetCudaComputeCapability", handle), lambda cc: f"{int(cc[0])}.{int(cc[1])}"
    )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def thermal_slowdown(violation: Any, uptime_file: Path = UPTIME) -> dict[str, Any] | Unknown:
    """NVML's thermal violation counter (nvmlViolationTime_t: ``violationTime`` in ns) as a
    counter since the boot (see the fact's declaration for why the boot)."""
    if isinstance(violation, Unknown):
        return violation
    uptime = read_text(uptime_file, limit=256)
    if isinstance(uptime, Unknown):
        return Unknown(f"the counter's start (the boot) is not known: {uptime.reason}")
    try:
        up_s = float(uptime.split()[0])
        total_s = int(violation.violationTime) / 1e9
    except (AttributeError, TypeError, ValueError, IndexError):
        return Unknown("NVML's violation status or /proc/uptime could not be read")
    now = time.time()
    return {"total": round(total_s, 3), "since": _iso(now - up_s), "read_at": _iso(now)}


def architecture_name(code: int) -> str | Unknown:
    """NVML's architecture code as a name ('ampere'); Unknown for codes this hostcheck predates."""
    if int(code) == NVML_ARCH_UNKNOWN:
        return Unknown("NVML reports the architecture as unknown")
    return arch_from_nvml(int(code)) or Unknown(f"NVML architecture code {int(code)} is newer than this hostcheck")


def _unavailable(reason: str) -> dict[str, Any]:
    gone = Unknown(f"NVML unavailable: {reason}")
    return {
        "nvml": {"available": False, "reason": reason},
        "driver_version": gone,
        "cuda_driver_version": gone,
        "nvml_version": gone,
        "devices": gone,
    }


def nvml_facts(nvml: Any) -> dict[str, Any]:
    """Everything NVML says, given a pynvml-like module; nvmlShutdown only after a good init."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return _unavailable(init_failure_reason(exc))
    try:
        count = _system_call(nvml, "nvmlDeviceGetCount")
        devices: list[dict[str, Any]] | Unknown = (
            count if isinstance(count, Unknown) else [_device(nvml, i) for i in range(int(count))]
        )
        return {
            "nvml": {"available": True, "reason": None},
            "driver_version": _map(_system_call(nvml, "nvmlSystemGetDriverVersion"), _text),
            "cuda_driver_version": _map(
                _system_call(nvml, "nvmlSystemGetCudaDriverVersion_v2"), lambda v: cuda_version_string(int(v))
            ),
            "nvml_version": _map(_system_call(nvml, "nvmlSystemGetNVMLVersion"), _text),
            "devices": devices,
        }
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # a lost GPU can fail the shutdown; the readings are already taken


def vendor_name(vendor_id: str) -> str:
    return VENDORS.get(vendor_id.strip().lower(), "other")


def is_display_class(class_text: str) -> bool:
    try:
        return int(class_text.strip(), 16) >> 16 == 0x03
    except ValueError:
        return False


def scan_display_adapters(root: Path = PCI_DEVICES) -> list[dict[str, Any]] | Unknown:
    """Every PCI display-class device (0x03xxxx), whatever driver (or none) is bound."""
    try:
        addresses = sorted(os.listdir(root))
    except OSError as exc:
        return Unknown(f"cannot list {root}: {exc.strerror or exc}")
    adapters = []
    for address in addresses:
        cls = read_text(root / address / "class", limit=64)
        if isinstance(cls, Unknown) or not is_display_class(cls):
            continue
        vendor = read_text(root / address / "vendor", limit=64)
        device = read_text(root / address / "device", limit=64)
        driver: str | None | Unknown
        try:
            driver = os.path.basename(os.readlink(root / address / "driver"))
        except FileNotFoundError:
            driver = None  # no driver bound is a real answer
        except OSError as exc:
            driver = Unknown(f"cannot read {root / address / 'driver'}: {exc.strerror or exc}")
        vendor_id = _map(vendor, lambda v: v.strip().lower())
        adapters.append(
            {
                "pci_address": address,
                "vendor_id": vendor_id,
                "vendor": _map(vendor_id, vendor_name),
                "device_id": _map(device, lambda d: d.strip().lower()),
                "driver": driver,
            }
        )
    return adapters


def recorder_counters(nvml: Any) -> list[dict[str, Any]] | Unknown:
    """Per device, the counters `hostcheck watch` follows besides the audit's facts: NVML's
    power violation counter (seconds; nvmlViolationTime_t.violationTime is in ns) and the
    volatile ECC error counts (since the driver loaded). Unknown per value where NVML has
    none (GeForce cards have no ECC counts), Unknown for all when NVML cannot start."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return Unknown(init_failure_reason(exc))
    try:
        count = _system_call(nvml, "nvmlDeviceGetCount")
        if isinstance(count, Unknown):
            return count
        out = []
        for index in range(int(count)):
            row: dict[str, Any] = {"index": index}
            try:
                handle = _call(nvml, "nvmlDeviceGetHandleByIndex", index)
                if isinstance(handle, Unknown):
                    row.update(power_violation_s=handle, ecc_corrected=handle, ecc_uncorrected=handle)
                else:
                    power = _call(nvml, "nvmlDeviceGetViolationStatus", handle, NVML_PERF_POLICY_POWER)
                    row["power_violation_s"] = _map(power, lambda v: int(v.violationTime) / 1e9)
                    row["ecc_corrected"] = _map(_call(nvml, "nvmlDeviceGetTotalEccErrors", handle,
                                                      NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC), int)
                    row["ecc_uncorrected"] = _map(_call(nvml, "nvmlDeviceGetTotalEccErrors", handle,
                                                        NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC), int)
            except _GpuLost as lost:
                row.update(power_violation_s=Unknown(str(lost)), ecc_corrected=Unknown(str(lost)),
                           ecc_uncorrected=Unknown(str(lost)))
            out.append(row)
        return out
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def load_nvml() -> Any:
    try:
        import pynvml  # deferred: the binding is only needed at audit time
    except ImportError as exc:
        return Unknown(f"nvidia-ml-py (pynvml) is not installed: {exc}")
    return pynvml


def collect(ctx: Any, nvml: Any = None) -> dict[str, Any]:
    nvml = load_nvml() if nvml is None else nvml
    facts = _unavailable(nvml.reason) if isinstance(nvml, Unknown) else nvml_facts(nvml)
    facts["display_adapters"] = scan_display_adapters()
    return facts
