"""System and power checks (SYS-*, PWR-*): CPU, memory, OS, firmware, chassis, mains and sleep."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import (
    KERNEL_NAME,
    CheckResult,
    Outcome,
    check,
    compare,
    display_adapters,
    failed,
    family,
    known_devices,
    need,
    passed,
    state_of,
    unknown,
    version_tuple,
)
from hostcheck.checks.readers import APPLE_ARCHES, cpu_arch, display_manager, gpu_count, graphical_session
from hostcheck.checks.readers import CHASSIS as _CHASSIS
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.wording import counted

SYS = family("SYS", "System", order=20)
PWR = family("PWR", "Power and uptime", order=30)

_BATTERY = "power.battery_present"


def _ram_mib(facts: dict[str, Any]) -> float:
    return float(need(facts, "system.ram_total_mib"))


@check(
    "SYS-1010",
    title="Physical CPU cores per GPU",
    op=">=",
    unit="cores/GPU",
    threshold="number",
    why="Data loading and the container runtime need CPU; too few cores starve the GPU.",
    fix="Use a CPU with more cores, or rent fewer GPUs from this machine.",
)
def cores_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    cores = int(need(facts, "system.cpu_physical_cores"))
    gpus = gpu_count(facts)
    return compare(round(cores / gpus, 2), threshold, f"{counted(cores, 'core')}, {counted(gpus, 'GPU')}")


@check(
    "SYS-1020",
    title="RAM per GPU",
    op=">=",
    unit="GiB/GPU",
    threshold="number",
    why="Jobs stage data and models in host memory; below the floor they are killed or swap.",
    fix="Add RAM.",
)
def ram_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    ram = _ram_mib(facts) / 1024
    gpus = gpu_count(facts)
    return compare(round(ram / gpus, 1), threshold, f"{ram:.1f} GiB RAM, {counted(gpus, 'GPU')}")


@check(
    "SYS-1110",
    title="RAM in total",
    op=">=",
    unit="GiB",
    threshold="number",
    why="Jobs stage data and models in host memory; below the floor they are killed or swap.",
    fix="Add RAM.",
)
def ram_total(facts: dict[str, Any], threshold: Any) -> CheckResult:
    return compare(round(_ram_mib(facts) / 1024, 1), threshold)


@check(
    "SYS-1030",
    title="RAM relative to total VRAM",
    op=">=",
    unit="x VRAM",
    threshold="number",
    why="Loading a model that fills the GPU needs about as much host RAM; Vast's self-test "
    "requires RAM of at least 95 % of total VRAM.",
    fix="Add RAM until it matches the total VRAM.",
)
def ram_vs_vram(facts: dict[str, Any], threshold: Any) -> CheckResult:
    ram = _ram_mib(facts)
    vram = sum(float(d.get("vram_total_mib") or 0) for d in known_devices(facts))
    if vram <= 0:
        return unknown("total VRAM unknown")
    return compare(round(ram / vram, 2), threshold, f"{ram / 1024:.1f} GiB RAM, {vram / 1024:.1f} GiB VRAM")


@check(
    "SYS-1040",
    title="CPU supports AVX",
    op="==",
    threshold="none",
    why="Many images (PyTorch, TensorFlow builds) require AVX and crash with 'illegal instruction' without it.",
    fix="Use a CPU with AVX (any x86-64 CPU since about 2011 outside low-end Atom/Celeron).",
)
def cpu_avx(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return passed("AVX") if need(facts, "system.cpu_avx") else failed("no AVX")


@check(
    "SYS-1050",
    title="Operating system supported by the platform",
    op="in",
    threshold="list",
    why="The provider agent is built and supported for specific systems; elsewhere it does not "
    "install, or breaks on upgrades.",
    fix="Install a supported system (see the threshold) on the machine, ideally on its own disk.",
    precondition="runs on {threshold}",
)
def os_supported(facts: dict[str, Any], threshold: Any) -> Outcome:
    return _os_in(facts, threshold)


@check(
    "SYS-1130",
    title="OS release the platform currently names",
    op="in",
    threshold="list",
    why="A platform's minimum release and the releases it currently tests differ; on an older "
    "release its installer and driver packages are the first to break.",
    fix="Upgrade to one of the releases named in the threshold (a fresh install on its own disk "
    "is the cleanest).",
)
def os_current(facts: dict[str, Any], threshold: Any) -> Outcome:
    return _os_in(facts, threshold)


def _os_in(facts: dict[str, Any], threshold: Any) -> Outcome:
    os_id = str(need(facts, "system.os_id")).lower()
    version = str(need(facts, "system.os_version_id"))
    measured = f"{os_id} {version}"
    for allowed in threshold:
        name, _, want = str(allowed).lower().partition(" ")
        if name != os_id:
            continue
        if not want or want == version:
            return passed(measured)
        if want.endswith("+"):
            if version_tuple(version) >= version_tuple(want[:-1]):
                return passed(measured)
    return failed(measured)


@check(
    "SYS-1060",
    title="Apple Silicon Mac",
    op="==",
    threshold="none",
    why="This platform serves models on Apple Silicon (Metal) only; NVIDIA/CUDA machines cannot join.",
    fix="Host this platform on an Apple Silicon Mac (M1 or newer) with macOS 14+; nothing on this machine changes it.",
    precondition="Apple Silicon Macs only",
)
def apple_silicon(facts: dict[str, Any], _threshold: Any) -> Outcome:
    kernel = str(need(facts, KERNEL_NAME))
    arch = cpu_arch(facts)
    measured = f"{kernel} {arch}"
    return passed(measured) if kernel == "Darwin" and arch in APPLE_ARCHES else failed(measured)


@check(
    "SYS-1070",
    title="Secure Boot off",
    op="==",
    threshold="none",
    why="With Secure Boot on, unsigned NVIDIA kernel modules do not load after a driver update "
    "unless a MOK key is enrolled.",
    fix="Disable Secure Boot in the firmware setup, or enrol a MOK key for DKMS modules.",
    shown=state_of("Secure Boot"),
    requirement="Secure Boot must be off",
)
def secure_boot_off(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return failed("on") if need(facts, "system.secure_boot") else passed("off")


ARCH_NAMES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
"""Other names of the same architecture (Debian's, Windows', Apple's) mapped to the kernel's."""


@check(
    "SYS-1150",
    title="CPU architecture supported by the platform",
    op="in",
    threshold="list",
    why="The provider's agent, its container images and the self-test are built for one "
    "architecture; on another they do not run at all.",
    fix="Host this platform on a machine of the architecture named in the threshold; nothing "
    "on this machine changes it.",
    precondition="runs on {threshold}",
)
def cpu_arch_supported(facts: dict[str, Any], threshold: Any) -> Outcome:
    arch = cpu_arch(facts)
    name = ARCH_NAMES.get(arch.lower(), arch.lower())
    accepted = {ARCH_NAMES.get(str(a).lower(), str(a).lower()) for a in threshold}
    return passed(arch) if name in accepted else failed(arch)


@check(
    "SYS-1080",
    title="IOMMU enabled",
    op="==",
    threshold="none",
    why="VFIO passthrough of the GPU into customers' VMs needs a working IOMMU.",
    fix="Enable VT-d / AMD-Vi in firmware and add intel_iommu=on or amd_iommu=on to the kernel command line.",
)
def iommu_enabled(facts: dict[str, Any], _threshold: Any) -> Outcome:
    groups = lookup(facts, "system.iommu_groups")
    on = need(facts, "system.iommu_enabled")
    shown = f"{groups} groups" if not isinstance(groups, Unknown) else ("on" if on else "off")
    return passed(shown) if on else failed(shown)


@check(
    "SYS-1090",
    title="A second, non-NVIDIA display adapter",
    op=">=",
    unit="adapters",
    threshold="number",
    why="When every NVIDIA GPU is handed to VMs (VFIO), the host itself needs another adapter "
    "for its console; TensorDock's installer exits without one.",
    fix="Use the CPU's integrated graphics or add a small non-NVIDIA card.",
)
def non_nvidia_display(facts: dict[str, Any], threshold: Any) -> CheckResult:
    adapters = display_adapters(facts)
    others = [a for a in adapters if a.get("vendor") != "nvidia"]
    return compare(len(others), threshold, ", ".join(str(a.get("vendor")) for a in others))


@check(
    "PWR-1010",
    title="Not a laptop",
    op="==",
    threshold="none",
    why="A laptop is usually a personal machine; sustained full load shortens battery life, "
    "throttles, and the lid, Wi-Fi and sleep settings make it an unreliable host.",
    fix="Use a desktop or server chassis for hosting.",
)
def not_laptop_chassis(facts: dict[str, Any], _threshold: Any) -> Outcome:
    kind = need(facts, _CHASSIS)
    battery = lookup(facts, _BATTERY)
    if kind == "laptop" or battery is True:
        evidence = f"chassis {kind}" + (", battery present" if battery is True else "")
        return failed("laptop", evidence)
    return passed(str(kind))


@check(
    "PWR-1020",
    title="Running on mains power",
    op="==",
    threshold="none",
    why="On battery the GPU is power-limited and the machine will shut down mid-job; Salad "
    "requires laptops to stay plugged in.",
    fix="Plug the machine in.",
)
def on_mains(facts: dict[str, Any], _threshold: Any) -> Outcome:
    if need(facts, _BATTERY) is False:
        return passed("no battery")
    return passed("on AC") if need(facts, "power.on_ac") else failed("on battery")


@check(
    "PWR-1030",
    title="Sleep, suspend and hibernate disabled",
    op="==",
    threshold="none",
    why="A host that suspends drops running jobs and its listing; platforms count that as downtime "
    "(TensorDock pays 5x the hourly rate for downtime; Vast lowers reliability).",
    fix="`sudo systemctl mask sleep.target suspend.target hibernate.target hybrid-sleep.target`",
    fix_role="host_baseline: host_baseline_mask_sleep",
)
def sleep_masked(facts: dict[str, Any], _threshold: Any) -> Outcome:
    targets = need(facts, "power.sleep_targets")
    if not isinstance(targets, dict) or not targets:
        return unknown("no sleep target states collected")
    states = dict(targets)
    open_targets = sorted(n for n, s in states.items() if not isinstance(s, Unknown) and s != "masked")
    unknown_targets = sorted(n for n, s in states.items() if isinstance(s, Unknown))
    if open_targets:
        return failed(f"{len(open_targets)} not masked", ", ".join(open_targets))
    if unknown_targets:
        return unknown(f"state of {', '.join(unknown_targets)} unknown")
    return passed("all masked")


@check(
    "SYS-1100",
    title="Not inside a VM or container",
    op="==",
    threshold="none",
    why="The provider agent expects the bare machine: GPU passthrough, Docker and the self-test "
    "behave differently in a guest.",
    fix="Run the audit (and the provider) on the host itself.",
)
def bare_metal(facts: dict[str, Any], _threshold: Any) -> Outcome:
    virt = need(facts, "system.virtualization")
    return passed("bare metal") if virt in ("none", None) else failed(str(virt))


@check(
    "SYS-1120",
    title="A server install (no desktop environment)",
    op="==",
    threshold="none",
    why="Vast's stricter verification draft accepts Ubuntu Server only: a desktop edition runs "
    "a display server and session services that take GPU memory and change under updates.",
    fix="Install the server edition, or turn the desktop off (`sudo systemctl set-default "
    "multi-user.target`, then remove the desktop packages and display manager).",
)
def server_install(facts: dict[str, Any], _threshold: Any) -> Outcome:
    # Not the default target: systemd ships default.target -> graphical.target, so stock Debian
    # and Ubuntu servers boot to it. A desktop is what a desktop installs or runs.
    manager_unknown: Missing | None = None
    try:
        manager = display_manager(facts)
    except Missing as missing:
        manager, manager_unknown = None, missing
    sessions_path = "system.desktop_sessions"
    sessions = lookup(facts, sessions_path)
    try:
        running = graphical_session(facts)
    except Missing:
        running = None
    evidence = []
    if isinstance(manager, str) and manager:
        evidence.append(f"display manager {manager} installed")
    if isinstance(sessions, list) and sessions:
        evidence.append(f"desktop sessions installed: {', '.join(map(str, sessions[:5]))}")
    if running is True:
        evidence.append("a graphical session is running")
    if evidence:
        return failed("desktop", "; ".join(evidence))
    if isinstance(sessions, Unknown) or not isinstance(sessions, list):
        reason = sessions.reason if isinstance(sessions, Unknown) else "not a list"
        raise Missing(sessions_path, reason)
    if manager_unknown is not None:
        raise manager_unknown
    target = lookup(facts, "system.default_target")
    boots = f"; boots to {target}" if isinstance(target, str) else ""
    return passed("server", f"no display manager, no desktop session installed or running{boots}")


@check(
    "SYS-1140",
    title="Linux with KVM available",
    op="==",
    threshold="none",
    why="The platform rents customers whole virtual machines (KVM/libvirt with the GPU passed "
    "through); the host must be Linux with KVM usable (/dev/kvm).",
    fix="Enable VT-x / AMD-V in the firmware setup and load kvm_intel or kvm_amd; on a Mac or "
    "Windows machine this platform cannot be used.",
    precondition="Linux KVM hosts only",
)
def linux_kvm(facts: dict[str, Any], _threshold: Any) -> Outcome:
    kernel = str(need(facts, KERNEL_NAME))
    if kernel != "Linux":
        return failed(kernel, f"{kernel} is not a Linux KVM host")
    kvm = need(facts, "system.kvm_device")
    if kvm:
        return passed("Linux with /dev/kvm")
    ext = lookup(facts, "system.cpu_virt_ext")
    if isinstance(ext, Unknown):
        hint = f"CPU virtualisation flags unknown: {ext.reason}"
    elif ext is None:
        hint = "the CPU shows no vmx/svm flag (off in firmware, or a VM without nested virtualisation)"
    else:
        hint = f"the CPU has {ext} but no kvm module is loaded"
    return failed("no /dev/kvm", hint)
