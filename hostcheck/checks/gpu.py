"""GPU checks (NVML facts)."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import (
    Missing,
    Outcome,
    check,
    compare,
    device_field,
    failed,
    known_devices,
    need,
    passed,
    unknown,
    version_tuple,
)
from hostcheck.facts import Unknown, lookup

# GB/s per lane after encoding overhead, by PCIe generation.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def _nvidia_pci_count(facts: dict[str, Any]) -> int | None:
    adapters = lookup(facts, "gpu.display_adapters")
    if isinstance(adapters, Unknown) or not isinstance(adapters, list):
        return None
    return sum(1 for a in adapters if isinstance(a, dict) and a.get("vendor") == "nvidia")


@check(
    "GPU-1010",
    title="A working NVIDIA GPU",
    op=">=",
    unit="GPUs",
    threshold="number",
    why="Every GPU marketplace here rents NVIDIA GPUs through the driver's NVML/CUDA stack; "
    "without a working driver no job can use the card.",
    fix="Install the NVIDIA driver (Debian: `apt install nvidia-driver`; Ubuntu: "
    "`ubuntu-drivers install`), reboot, and check `nvidia-smi` lists the card.",
    fix_role="nvidia_host: nvidia_host_enabled",
)
def gpu_present(facts: dict[str, Any], threshold: Any) -> Outcome:
    nvml = lookup(facts, "gpu.nvml")
    devices = lookup(facts, "gpu.devices")
    if isinstance(nvml, dict) and nvml.get("available") and isinstance(devices, list):
        return compare(len(devices), ">=", threshold, ", ".join(str(d.get("name")) for d in devices))
    on_bus = _nvidia_pci_count(facts)
    why_not = nvml.get("reason") if isinstance(nvml, dict) else getattr(nvml, "reason", "NVML not collected")
    if on_bus is None:
        return unknown(f"NVML unusable ({why_not}) and the PCI bus could not be read")
    if on_bus == 0:
        return failed(0, f"no NVIDIA display device on the PCI bus; NVML: {why_not}")
    return failed(0, f"{on_bus} NVIDIA device(s) on the PCI bus but the driver is not usable: {why_not}")


@check(
    "GPU-1020",
    title="VRAM per GPU",
    op=">=",
    unit="GiB",
    threshold="number",
    why="Jobs are matched on VRAM; below the platform's floor the machine is not offered, and "
    "customers' models that do not fit fail at load time.",
    fix="Nothing to configure: VRAM is fixed by the card. Offer the machine where its VRAM "
    "suffices, or use a card with more memory.",
)
def vram_per_gpu(facts: dict[str, Any], threshold: Any) -> Outcome:
    sizes = [device_field(d, "vram_total_mib") / 1024 for d in known_devices(facts)]
    if not sizes:
        return failed(0, "no GPU")
    return compare(round(min(sizes), 1), ">=", threshold)


@check(
    "GPU-1030",
    title="CUDA version supported by the driver",
    op=">=",
    unit="",
    threshold="string",
    why="Customers' images are built for a CUDA release; a driver that supports an older CUDA "
    "cannot run them.",
    fix="Upgrade the NVIDIA driver to a branch that supports the required CUDA version.",
    fix_role="nvidia_host: nvidia_host_enabled",
)
def cuda_version(facts: dict[str, Any], threshold: Any) -> Outcome:
    return _version_at_least(facts, "gpu.cuda_driver_version", threshold)


@check(
    "GPU-1040",
    title="NVIDIA driver version",
    op=">=",
    threshold="string",
    why="Platforms pin a minimum driver branch for their runtime and security fixes.",
    fix="Install a newer NVIDIA driver branch.",
    fix_role="nvidia_host: nvidia_host_enabled",
)
def driver_version(facts: dict[str, Any], threshold: Any) -> Outcome:
    return _version_at_least(facts, "gpu.driver_version", threshold)


def _version_at_least(facts: dict[str, Any], path: str, threshold: Any) -> Outcome:
    measured = str(need(facts, path))
    ok = version_tuple(measured) >= version_tuple(str(threshold))
    return Outcome("pass" if ok else "fail", measured)


@check(
    "GPU-1050",
    title="GPU power limit vs its default",
    op=">=",
    unit="ratio",
    threshold="number",
    why="A GPU capped well below its default power runs jobs slower than its model name "
    "promises; Salad marks such GPUs 'Degraded' and sends them no container jobs.",
    fix="Raise the cap to the default: `sudo nvidia-smi -pl <default W>` (and on a laptop use "
    "the vendor's performance mode, plugged in). Make it persistent with the nvidia_host role.",
    fix_role="nvidia_host: nvidia_host_power_limit_w",
)
def power_limit_ratio(facts: dict[str, Any], threshold: Any) -> Outcome:
    worst: tuple[float, str] | None = None
    for device in known_devices(facts):
        limit = float(device_field(device, "power_limit_w"))
        default = float(device_field(device, "power_default_w"))
        if default <= 0:
            raise Missing("gpu.devices.power_default_w", "default power limit reported as 0")
        ratio = limit / default
        text = f"GPU {device.get('index')}: {limit:g} W of {default:g} W default"
        if worst is None or ratio < worst[0]:
            worst = (ratio, text)
    if worst is None:
        return failed(0, "no GPU")
    return compare(round(worst[0], 2), ">=", threshold, worst[1])


@check(
    "GPU-1060",
    title="Not a laptop GPU",
    op="==",
    threshold="none",
    why="Laptop GPUs share a thermal and power budget with the CPU, throttle under sustained "
    "load, and wear the battery; hosting means days of full load.",
    fix="Use a desktop or server GPU for hosting. If you go ahead on a laptop: keep it plugged "
    "in, in the vendor's performance mode, on a hard surface with airflow.",
)
def not_laptop_gpu(facts: dict[str, Any], _threshold: Any) -> Outcome:
    laptops = []
    for device in known_devices(facts):
        if device_field(device, "is_laptop"):
            laptops.append(f"{device.get('name')} ({device.get('laptop_evidence', 'laptop')})")
    if laptops:
        return failed("laptop GPU", "; ".join(laptops))
    return passed("desktop/server GPU")


@check(
    "GPU-1070",
    title="PCIe bandwidth per GPU",
    op=">",
    unit="GB/s",
    threshold="number",
    why="Model loading and multi-GPU jobs move data over PCIe; Vast's self-test fails a GPU "
    "below its bandwidth floor (risers and x1/x4 slots are the usual cause).",
    fix="Seat the GPU in a full-width slot (x8/x16) directly, without an x1 riser, and check "
    "the BIOS PCIe generation setting.",
)
def pcie_bandwidth(facts: dict[str, Any], threshold: Any) -> Outcome:
    worst: tuple[float, str] | None = None
    for device in known_devices(facts):
        # The link drops its generation when idle; the slot's width does not.
        gen = int(device_field(device, "pcie_gen_max"))
        width = int(device_field(device, "pcie_width_current"))
        gbps = PCIE_LANE_GBPS.get(gen, 0.0) * width
        text = f"GPU {device.get('index')}: PCIe gen {gen} x{width}"
        if worst is None or gbps < worst[0]:
            worst = (gbps, text)
    if worst is None:
        return failed(0, "no GPU")
    return compare(round(worst[0], 2), ">", threshold, worst[1])


@check(
    "GPU-1080",
    title="All GPUs the same model",
    op="==",
    unit="models",
    threshold="none",
    why="Marketplaces list a machine as N x one model; mixed cards confuse scheduling "
    "(Vast requires one model; Salad disqualifies an old GPU mixed with a new one).",
    fix="Host identical GPUs in one machine, or remove the odd card.",
)
def same_model(facts: dict[str, Any], _threshold: Any) -> Outcome:
    names = sorted({str(device_field(d, "name")) for d in known_devices(facts)})
    if len(names) <= 1:
        return passed(len(names), ", ".join(names))
    return failed(len(names), ", ".join(names))


@check(
    "GPU-1090",
    title="GPU not throttling",
    op="==",
    threshold="none",
    why="Active thermal or power slowdown means customers get less than the card's rated speed; "
    "it also shows cooling or power delivery is at its limit.",
    fix="Improve cooling, clean the fans, raise the power cap to default, and re-check under load.",
)
def not_throttling(facts: dict[str, Any], _threshold: Any) -> Outcome:
    serious = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown", "sw_power_cap"}
    seen = []
    for device in known_devices(facts):
        reasons = device_field(device, "throttle_reasons")
        hit = sorted(serious.intersection(reasons))
        if hit:
            seen.append(f"GPU {device.get('index')}: {', '.join(hit)}")
    return failed("throttling", "; ".join(seen)) if seen else passed("none")


@check(
    "GPU-1100",
    title="No display running on the GPU",
    op="==",
    threshold="none",
    why="A monitor and desktop on the rented GPU take VRAM and compute from the job, and mean "
    "the machine is also someone's workstation.",
    fix="Run the host headless (no monitor on the GPU, no desktop session), or drive the "
    "display from an integrated GPU.",
)
def display_inactive(facts: dict[str, Any], _threshold: Any) -> Outcome:
    active = [str(d.get("index")) for d in known_devices(facts) if device_field(d, "display_active")]
    return failed(f"display on GPU {', '.join(active)}") if active else passed("headless")


@check(
    "GPU-1110",
    title="Persistence mode on",
    op="==",
    threshold="none",
    why="Without persistence the driver re-initialises the GPU for each job: slow starts and, "
    "on some hosts, lost power settings.",
    fix="Enable nvidia-persistenced (`systemctl enable --now nvidia-persistenced`).",
    fix_role="nvidia_host: nvidia_host_persistenced",
)
def persistence_mode(facts: dict[str, Any], _threshold: Any) -> Outcome:
    off = [str(d.get("index")) for d in known_devices(facts) if not device_field(d, "persistence_mode")]
    return failed(f"off on GPU {', '.join(off)}") if off else passed("on")
