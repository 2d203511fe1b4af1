"""GPU checks (GPU-*, from the NVML facts).

One module for the one family: each check is a short function of the same device facts, and
splitting them would only scatter the family's numbering.
"""

from __future__ import annotations

import re
from typing import Any

from hostcheck.accumulated import covered_s, share
from hostcheck.checks.base import (
    CheckResult,
    Outcome,
    check,
    compare,
    device_field,
    display_adapters,
    failed,
    family,
    is_macos,
    known_devices,
    listed_devices,
    need,
    no_devices,
    pass_if,
    passed,
    skipped,
    state_of,
    unknown,
    version_tuple,
)
from hostcheck.checks.readers import APPLE_ARCHES, NOT_SUPPORTED, chassis, cpu_arch
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.knowledge import gpu_models
from hostcheck.knowledge.laptop import laptop_verdict

GPU = family("GPU", "GPU", order=10)

_NVML = "gpu.nvml"

# GB/s per lane after encoding overhead, by PCIe generation.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def _nvidia_pci_count(facts: dict[str, Any]) -> int | None:
    try:
        adapters = display_adapters(facts)
    except Missing:
        return None
    if not isinstance(adapters, list):
        return None
    return sum(1 for a in adapters if isinstance(a, dict) and a.get("vendor") == "nvidia")


MACOS_NO_NVIDIA = (
    "macOS: NVIDIA ships no driver for it (the CUDA 10.2 release notes: 10.2 is the last release "
    "to support macOS; NVIDIA's last macOS driver was for 10.13 High Sierra), so no NVIDIA GPU can work here"
)
NO_NVIDIA_ON_BUS = "no NVIDIA display device on the PCI bus"


def no_nvidia_hardware(detail: str) -> bool:
    """GPU-1010's detail says this machine has no NVIDIA GPU that could work (none on the bus, or
    a Mac): no driver or setting fixes that, only other hardware."""
    return detail.startswith((NO_NVIDIA_ON_BUS, MACOS_NO_NVIDIA))
"""Why a Mac never has a working NVIDIA GPU: NVIDIA CUDA Toolkit 10.2 release notes, General CUDA,
https://docs.nvidia.com/cuda/archive/10.2/cuda-toolkit-release-notes/index.html ("CUDA 10.2
(Toolkit and NVIDIA driver) is the last release to support macOS for developing and running CUDA
applications")."""


@check(
    "GPU-1010",
    title="A working NVIDIA GPU",
    op=">=",
    unit="GPUs",
    threshold="number",
    why="Every GPU marketplace here rents NVIDIA GPUs through the driver's NVML/CUDA stack; "
    "without a working driver no job can use the card.",
    fix="On Linux, install the NVIDIA driver (Debian: `apt install nvidia-driver`; Ubuntu: "
    "`ubuntu-drivers install`), reboot, and check `nvidia-smi` lists the card. A Mac has no "
    "current NVIDIA driver: only platforms that rent Apple GPUs can use it.",
    fix_role="nvidia_host: nvidia_host_enabled",
)
def gpu_present(facts: dict[str, Any], threshold: Any) -> CheckResult:
    nvml = lookup(facts, _NVML)
    devices = listed_devices(facts)
    available = nvml.get("available") if isinstance(nvml, dict) else nvml
    if available is True and isinstance(devices, list):
        return compare(len(devices), threshold, ", ".join(str(d.get("name")) for d in devices))
    if is_macos(facts):
        return failed(0, MACOS_NO_NVIDIA)
    # Not collected is not "not usable": only NVML's own answer that it failed says that.
    for path, value in ((_NVML, nvml), (f"{_NVML}.available", available)):
        if isinstance(value, Unknown):
            raise Missing(path, value.reason)
    if available is True:  # NVML works but its device list was not recorded
        raise no_devices(getattr(devices, "reason", "not a list"))
    on_bus = _nvidia_pci_count(facts)
    why_not = nvml.get("reason") if isinstance(nvml, dict) else getattr(nvml, "reason", "NVML not collected")
    if on_bus is None:
        return unknown(f"NVML unusable ({why_not}) and the PCI bus could not be read")
    if on_bus == 0:
        return failed(0, f"{NO_NVIDIA_ON_BUS}; NVML: {why_not}")
    return failed(0, f"{on_bus} NVIDIA device(s) on the PCI bus but the driver is not usable: {why_not}")


@check(
    "GPU-1020",
    title="VRAM per GPU",
    op=">=",
    unit="GiB",
    threshold="number",
    why="Jobs are matched on VRAM; below the platform's floor the machine is not offered, and "
    "customers' models that do not fit fail at load time.",
    fix="Use a card with more memory, or offer the machine where its VRAM suffices; VRAM is "
    "fixed by the card, nothing configures it.",
)
def vram_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    sizes = [device_field(d, "vram_total_mib") / 1024 for d in known_devices(facts)]
    if not sizes:
        return failed(0, "no GPU")
    return compare(round(min(sizes), 1), threshold)


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
    return pass_if(ok, measured)


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
    requirement="the GPU power limit, as a share of its default, must be high enough",
)
def power_limit_ratio(facts: dict[str, Any], threshold: Any) -> CheckResult:
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
    return compare(round(worst[0], 2), threshold, worst[1])


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
    machine_chassis = chassis(facts)
    for device in known_devices(facts):
        is_laptop, evidence = laptop_verdict(device.get("name", Unknown("GPU name not collected")), machine_chassis)
        if isinstance(is_laptop, Unknown):
            raise Missing(f"gpu.devices[{device.get('index', '?')}].name", is_laptop.reason)
        if is_laptop:
            laptops.append(f"{device.get('name')} ({evidence})")
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
def pcie_bandwidth(facts: dict[str, Any], threshold: Any) -> CheckResult:
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
    return compare(round(worst[0], 2), threshold, worst[1])


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
    shown=lambda value: {"none": "throttle reasons: none", "throttling": "GPU throttling"}.get(value, str(value)),
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
    shown=state_of("persistence mode"),
    requirement="persistence mode must be on",
)
def persistence_mode(facts: dict[str, Any], _threshold: Any) -> Outcome:
    off = [str(d.get("index")) for d in known_devices(facts) if not device_field(d, "persistence_mode")]
    return failed(f"off on GPU {', '.join(off)}") if off else passed("on")


def _architecture(device: dict[str, Any]) -> tuple[str, str]:
    """(architecture, how it was read): NVML's answer, else the compute capability, else the name."""
    arch = device.get("architecture")
    if isinstance(arch, str) and arch in gpu_models.ARCHITECTURES:
        return arch, "NVML"
    capability = device.get("compute_capability")
    if isinstance(capability, str):
        from_cc = gpu_models.arch_from_compute_capability(capability)
        if from_cc:
            return from_cc, f"compute capability {capability}"
    name = device.get("name")
    if isinstance(name, str):
        from_name = gpu_models.arch_from_name(name)
        if from_name:
            return from_name, "model name"
    why = arch.reason if isinstance(arch, Unknown) else "not collected"
    raise Missing(f"gpu.devices[{device.get('index', '?')}].architecture",
                  f"neither NVML ({why}) nor the compute capability nor the name "
                  f"{name if isinstance(name, str) else '(unknown)'!r} tells the GPU generation")


def _generation_rules(threshold: Any) -> tuple[str | None, list[str]]:
    """['nvidia pascal+', 'apple m1', ...] -> ('pascal', ['m1', ...])."""
    minimum: str | None = None
    chips: list[str] = []
    for entry in threshold:
        vendor, _, want = str(entry).lower().partition(" ")
        if vendor == "nvidia" and want.rstrip("+") in gpu_models.ARCHITECTURES:
            minimum = want.rstrip("+")
        elif vendor == "apple" and want:
            chips.append(want)
        else:
            raise ValueError(f"threshold entry {entry!r} is not 'nvidia ARCH+' or 'apple CHIP'")
    return minimum, chips


def _apple_chip(facts: dict[str, Any]) -> str | None:
    """'m2' for an Apple Silicon Mac ('Apple M2 Pro'), 'intel' for an Intel Mac (macOS has had
    no NVIDIA CUDA driver since 10.14), None for any other machine."""
    if not is_macos(facts):
        return None
    if cpu_arch(facts) not in APPLE_ARCHES:
        return "intel"
    path = "system.cpu_model"
    model = str(need(facts, path))
    match = re.match(r"Apple (M\d+)", model)
    if not match:
        raise Missing(path, f"{model!r} names no Apple Silicon chip")
    return match.group(1).lower()


@check(
    "GPU-1120",
    title="GPU generation supported by the platform",
    op="in",
    threshold="list",
    why="Platforms accept only recent GPU generations (Vast: Maxwell or newer; io.net: "
    "RTX 30xx or newer, or Apple M1-M3; Runpod's partners: Ampere or newer); an older card is "
    "not listed however well it is set up.",
    fix="Use a newer GPU, or offer the machine where its generation is accepted; the generation "
    "is fixed by the card, nothing configures it.",
)
def gpu_generation(facts: dict[str, Any], threshold: Any) -> Outcome:
    minimum, chips = _generation_rules(threshold)
    devices = listed_devices(facts)
    if isinstance(devices, Unknown):
        chip = _apple_chip(facts)
        if chip == "intel":
            return failed("Intel Mac", "no NVIDIA GPU usable on macOS, and not Apple Silicon")
        if chip is not None:
            if chip in chips:
                return passed(f"Apple {chip.upper()}")
            return failed(f"Apple {chip.upper()}", f"accepted: {', '.join(map(str, threshold))}")
        on_bus = _nvidia_pci_count(facts)
        if on_bus == 0:
            return failed("no NVIDIA GPU", "no NVIDIA display device on the PCI bus and not an Apple Silicon Mac")
        raise no_devices(devices.reason)  # an NVIDIA card on the bus whose generation NVML could not tell
    if not isinstance(devices, list) or not devices:
        return failed("no NVIDIA GPU", "NVML lists no GPU")
    if minimum is None:
        return failed("NVIDIA GPU", f"this platform accepts only {', '.join(map(str, threshold))}")
    seen, too_old = [], []
    for device in devices:
        arch, how = _architecture(device)
        seen.append(f"GPU {device.get('index')}: {arch} ({how})")
        if gpu_models.rank(arch) < gpu_models.rank(minimum):
            too_old.append(arch)
    oldest = min((_architecture(d)[0] for d in devices), key=gpu_models.rank)
    if too_old:
        return failed(oldest, f"{'; '.join(seen)}; needs {minimum} or newer")
    return passed(oldest, "; ".join(seen))


@check(
    "GPU-1130",
    title="ECC on, on GPUs that have it",
    op="==",
    threshold="none",
    why="A datacenter GPU with ECC switched off returns silently corrupted results after a memory "
    "error; customers' long jobs and the platform's checks rely on ECC catching them.",
    fix="`sudo nvidia-smi -e 1` and reboot (GeForce cards have no ECC: nothing to do there).",
    shown=state_of("ECC"),
)
def ecc_on(facts: dict[str, Any], _threshold: Any) -> Outcome:
    off, unclear, on = [], [], []
    for device in known_devices(facts):
        ecc = device.get("ecc_enabled", Unknown("not collected"))
        label = f"GPU {device.get('index')}"
        if ecc is True:
            on.append(label)
        elif ecc is False:
            off.append(label)
        elif isinstance(ecc, Unknown) and ecc.reason == NOT_SUPPORTED:
            continue  # this card has no ECC memory: nothing to switch on
        else:
            unclear.append(f"{label}: {getattr(ecc, 'reason', 'not reported')}")
    if off:
        return failed(f"off on {', '.join(off)}")
    if unclear:
        return unknown("ECC state unknown for " + "; ".join(unclear))
    if not on:
        return skipped("no GPU in this machine has ECC memory", "no ECC")
    return passed("on")


@check(
    "GPU-1140",
    title="VRAM free when the audit ran",
    op=">=",
    unit="ratio",
    threshold="number",
    why="Memory already in use belongs to something else on the machine (a desktop, a miner, a "
    "forgotten job); Vast's self-test wants about 98 % of VRAM free at its start and a 95 % "
    "allocation test to pass.",
    fix="Stop what uses the GPU (`nvidia-smi` lists the processes): close the desktop session on "
    "that GPU, stop miners and other jobs.",
)
def vram_free(facts: dict[str, Any], threshold: Any) -> CheckResult:
    worst: tuple[float, str] | None = None
    for device in known_devices(facts):
        total = float(device_field(device, "vram_total_mib"))
        used = float(device_field(device, "vram_used_mib"))
        if total <= 0:
            raise Missing("gpu.devices.vram_total_mib", "total VRAM reported as 0")
        ratio = (total - used) / total
        text = f"GPU {device.get('index')}: {used:.0f} of {total:.0f} MiB in use"
        if worst is None or ratio < worst[0]:
            worst = (ratio, text)
    if worst is None:
        return failed(0, "no GPU")
    return compare(round(worst[0], 3), threshold, worst[1])


@check(
    "GPU-1150",
    title="PCIe lanes for the GPU's compute",
    op="<=",
    unit="TFLOPS/lane",
    threshold="number",
    why="Vast asks for one PCIe lane per 2.5 TFLOPS of GPU compute: a fast card behind few lanes "
    "waits on its data. Lanes count as PCIe 3.0 lanes (a 4.0 lane carries two).",
    fix="Seat the GPU in a slot with more lanes (x16 from the CPU, no riser), and set the slot's "
    "PCIe generation to its maximum in the BIOS.",
)
def lanes_per_tflops(facts: dict[str, Any], threshold: Any) -> CheckResult:
    worst: tuple[float, str] | None = None
    for device in known_devices(facts):
        name = str(device_field(device, "name"))
        tflops = gpu_models.fp32_tflops(name)
        if tflops is None:
            raise Missing(f"gpu.devices[{device.get('index', '?')}].name",
                          f"no published FP32 TFLOPS for {name!r} in hostcheck's table")
        gen = int(device_field(device, "pcie_gen_max"))
        width = int(device_field(device, "pcie_width_current"))
        lanes = width * PCIE_LANE_GBPS.get(gen, 0.0) / PCIE_LANE_GBPS[3]
        if lanes <= 0:
            raise Missing("gpu.devices.pcie_width_current", f"no usable PCIe link (gen {gen} x{width})")
        per_lane = tflops / lanes
        text = f"GPU {device.get('index')}: {tflops:g} TFLOPS on PCIe gen {gen} x{width} ({lanes:.1f} gen-3 lanes)"
        width_max = device.get("pcie_width_max")
        if per_lane > threshold and isinstance(width_max, int) and width >= width_max >= 16:
            # The rule exists to catch risers and narrow slots; a card already on its full
            # x16 link cannot be given more lanes, so it is not held against the host.
            per_lane = min(per_lane, float(threshold))
            text += f"; already on its full x{width_max} link: no slot offers more lanes"
        if worst is None or per_lane > worst[0]:
            worst = (per_lane, text)
    if worst is None:
        return failed(0, "no GPU")
    return compare(round(worst[0], 2), threshold, worst[1])


@check(
    "GPU-1160",
    title="GPU power limit at stock settings",
    op=">=",
    unit="ratio",
    threshold="number",
    why="Salad asks for the GPU at its stock settings: a cap a little below the default is not "
    "yet 'power-limited' (no jobs at all) but still slows every job, and drifts easily further.",
    fix="Reset the cap to the default: `sudo nvidia-smi -pl <default W>`; on a laptop use the "
    "vendor's performance mode. Make it persistent with the nvidia_host role.",
    fix_role="nvidia_host: nvidia_host_power_limit_w",
)
def power_at_stock(facts: dict[str, Any], threshold: Any) -> CheckResult:
    return power_limit_ratio(facts, threshold)


@check(
    "GPU-1170",
    title="GPU time in thermal slowdown since boot",
    op="<=",
    unit="%",
    threshold="number",
    why="A GPU that slows itself for heat gives renters less than its rated speed, and time spent "
    "there shows the cooling at its limit; Vast asks hosts not to allow thermal instability under "
    "load. NVML counts this time from when the driver started, which is the boot while persistence "
    "mode keeps the GPU initialised.",
    fix="Clean the fans and heatsinks, give the case (or the laptop) airflow and a cooler room, then "
    "watch `nvidia-smi -q -d PERFORMANCE` under load: Clocks Event Reasons show SW/HW Thermal Slowdown.",
)
def thermal_slowdown_share(facts: dict[str, Any], threshold: Any) -> CheckResult:
    worst: tuple[float, str] | None = None
    for device in known_devices(facts):
        index = device.get("index", "?")
        counter = device_field(device, "thermal_slowdown")
        part, covered = share(counter), covered_s(counter)
        for value in (part, covered):
            if isinstance(value, Unknown):
                raise Missing(f"gpu.devices[{index}].thermal_slowdown", value.reason)
        assert isinstance(part, float) and isinstance(covered, float)
        pct = round(part * 100, 2)
        said = f"GPU {index}: {counter['total']:g} s of {covered / 86400:.1f} days since boot"
        if worst is None or pct > worst[0]:
            worst = (pct, said)
    if worst is None:
        raise no_devices("no GPU listed")
    return compare(worst[0], threshold, worst[1])
