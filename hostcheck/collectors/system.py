"""System facts: CPU, RAM, OS release, kernel, virtualization, Secure Boot, IOMMU, uptime."""

from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import read_text, run_command
from hostcheck.facts import Unknown

SECTION = "system"
TIMEOUT = 2

FIRMWARE = Path("/sys/firmware")
SECURE_BOOT_VAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
IOMMU_GROUPS = Path("/sys/kernel/iommu_groups")
# Files a container runtime leaves behind, and the name each stands for.
CONTAINER_MARKERS = (("/.dockerenv", "docker"), ("/run/.containerenv", "podman"))


KVM_DEVICE = "/dev/kvm"


def _blocks(text: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current.setdefault(key.strip(), value.strip())
    if current:
        blocks.append(current)
    return blocks


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """CPU model, AVX, core counts and the hypervisor flag from /proc/cpuinfo."""
    processors = [b for b in _blocks(text) if "processor" in b]
    if not processors:
        why = Unknown("/proc/cpuinfo lists no processor")
        keys = ("cpu_model", "cpu_avx", "cpu_logical_cores", "cpu_physical_cores", "hypervisor", "cpu_virt_ext")
        return dict.fromkeys(keys, why)
    first = processors[0]
    model: str | Unknown = first.get("model name") or first.get("Hardware") or first.get("cpu model") or ""
    if not model and "CPU implementer" in first:
        # ARM kernels name no model; implementer and part identify the core.
        model = f"CPU implementer {first['CPU implementer']}, part {first.get('CPU part', '?')}"
    flags_text = first.get("flags", first.get("Features"))
    flags = set(flags_text.split()) if flags_text is not None else None
    pairs = {(b["physical id"], b["core id"]) for b in processors if "physical id" in b and "core id" in b}
    no_flags = Unknown("/proc/cpuinfo has no flags line")
    return {
        "cpu_model": model or Unknown("/proc/cpuinfo names no CPU model"),
        "cpu_avx": "avx" in flags if flags is not None else no_flags,
        "cpu_logical_cores": len(processors),
        "cpu_physical_cores": len(pairs) if pairs else Unknown("/proc/cpuinfo has no physical id/core id"),
        "hypervisor": "hypervisor" in flags if flags is not None else no_flags,
        "cpu_virt_ext": (("vmx" if "vmx" in flags else "svm" if "svm" in flags else None)
                         if flags is not None else no_flags),
    }


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo as {key: value}; values carry the file's unit (kB for sizes)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and fields and fields[0].isascii() and fields[0].isdigit():
            values[key.strip()] = int(fields[0])
    return values


def ram_total_mib(meminfo: dict[str, int]) -> int | Unknown:
    if "MemTotal" not in meminfo:
        return Unknown("/proc/meminfo has no MemTotal")
    return meminfo["MemTotal"] // 1024


def parse_os_release(text: str) -> dict[str, str]:
    """os-release(5): shell-style KEY=value lines, values optionally quoted."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        if not key.isidentifier():
            continue
        try:
            words = shlex.split(raw, posix=True)
            value = " ".join(words)
        except ValueError:  # unbalanced quote: keep the text, minus the quote marks
            value = raw.strip().strip("\"'")
        out[key] = value
    return out


def parse_uptime(text: str) -> float | Unknown:
    fields = text.split()
    try:
        value = float(fields[0])
    except (IndexError, ValueError):
        return Unknown(f"unreadable /proc/uptime {text[:40]!r}")
    if value != value or value < 0 or value == float("inf"):
        return Unknown(f"unreadable /proc/uptime {text[:40]!r}")
    return round(value, 1)


def parse_secure_boot_var(data: bytes) -> bool | Unknown:
    """efivarfs: 4 bytes of attributes, then the variable; SecureBoot is one byte, 1 = on."""
    if len(data) < 5:
        return Unknown(f"SecureBoot variable has {len(data)} bytes, expected 5")
    return data[-1] == 1


def read_secure_boot(firmware: Path = FIRMWARE) -> bool | Unknown:
    efi = firmware / "efi"
    if not efi.is_dir():
        try:
            visible = any(os.scandir(firmware))
        except OSError:
            visible = False
        if visible:
            return False  # firmware is visible and has no EFI: legacy BIOS boot has no Secure Boot
        return Unknown(f"{firmware} is not visible (hidden in this container?)")
    efivars = efi / "efivars"
    try:
        names = os.listdir(efivars)
    except OSError as exc:
        return Unknown(f"cannot list {efivars}: {exc.strerror or exc} (efivarfs not mounted?)")
    if not names:
        return Unknown(f"{efivars} is empty (efivarfs not mounted?)")
    if SECURE_BOOT_VAR not in names:
        return False  # UEFI firmware without the variable does not support Secure Boot
    try:
        return parse_secure_boot_var((efivars / SECURE_BOOT_VAR).read_bytes())
    except OSError as exc:
        return Unknown(f"cannot read the SecureBoot variable: {exc.strerror or exc}")


def read_iommu_groups(groups: Path = IOMMU_GROUPS) -> int | Unknown:
    try:
        return len(os.listdir(groups))
    except FileNotFoundError:
        # The kernel creates the directory whenever it has IOMMU support; a kernel
        # without it has no IOMMU in use. Only a hidden /sys/kernel leaves us guessing.
        if (groups.parent / "mm").is_dir():
            return 0
        return Unknown(f"{groups.parent} is not visible")
    except OSError as exc:
        return Unknown(f"cannot list {groups}: {exc.strerror or exc}")


def detect_virtualization(
    detect_virt_output: str | Unknown,
    hypervisor_flag: bool | Unknown,
    container_file: str | Unknown,
    markers: list[str],
) -> str | Unknown:
    """systemd-detect-virt's answer, else container markers, else the CPU's hypervisor flag."""
    if isinstance(detect_virt_output, str) and detect_virt_output.strip():
        return detect_virt_output.strip().splitlines()[0].strip()
    if isinstance(container_file, str) and container_file.strip():
        return container_file.strip().splitlines()[0].strip()
    if markers:
        return markers[0]
    if hypervisor_flag is True:
        return "vm"  # the flag says a hypervisor is there, not which one
    if hypervisor_flag is False:
        return "none"
    reason = detect_virt_output.reason if isinstance(detect_virt_output, Unknown) else "empty answer"
    return Unknown(f"systemd-detect-virt: {reason}; no container marker; no CPU flags to check")


def _physical_cores_fallback() -> int | Unknown:
    import psutil  # deferred: only needed when /proc/cpuinfo has no topology

    count = psutil.cpu_count(logical=False)
    return count if count else Unknown("neither /proc/cpuinfo nor psutil report physical cores")


def collect(ctx: Any) -> dict[str, Any]:
    cpuinfo_text = read_text("/proc/cpuinfo", limit=4 << 20)
    if isinstance(cpuinfo_text, Unknown):
        cpu: dict[str, Any] = dict.fromkeys(
            ("cpu_model", "cpu_avx", "cpu_logical_cores", "cpu_physical_cores", "hypervisor", "cpu_virt_ext"),
            cpuinfo_text,
        )
    else:
        cpu = parse_cpuinfo(cpuinfo_text)
    if isinstance(cpu["cpu_physical_cores"], Unknown):
        cpu["cpu_physical_cores"] = _physical_cores_fallback()
    if isinstance(cpu["cpu_logical_cores"], Unknown) and os.cpu_count():
        cpu["cpu_logical_cores"] = os.cpu_count()

    meminfo = read_text("/proc/meminfo")
    ram = meminfo if isinstance(meminfo, Unknown) else ram_total_mib(parse_meminfo(meminfo))

    release_text = read_text("/etc/os-release")
    if isinstance(release_text, Unknown):
        release_text = read_text("/usr/lib/os-release")
    release = {} if isinstance(release_text, Unknown) else parse_os_release(release_text)
    no_release = Unknown(
        f"os-release not readable: {release_text.reason}"
        if isinstance(release_text, Unknown)
        else "not in os-release"
    )

    virt = run_command(["systemd-detect-virt"], timeout=1.0)
    virt_output = virt if isinstance(virt, Unknown) else virt.stdout
    container_file = read_text("/run/systemd/container", limit=256)
    markers = [name for path, name in CONTAINER_MARKERS if os.path.exists(path)]

    groups = read_iommu_groups()
    uptime = read_text("/proc/uptime", limit=256)
    facts = {
        "cpu_model": cpu["cpu_model"],
        "cpu_arch": platform.machine() or Unknown("platform reports no machine type"),
        "os_kernel_name": platform.system() or Unknown("platform reports no system name"),
        "cpu_physical_cores": cpu["cpu_physical_cores"],
        "cpu_logical_cores": cpu["cpu_logical_cores"],
        "cpu_avx": cpu["cpu_avx"],
        "ram_total_mib": ram,
        "os_id": release.get("ID", "linux" if release else no_release),  # os-release(5) default
        "os_version_id": release.get("VERSION_ID", no_release),
        "os_pretty": release.get("PRETTY_NAME", no_release),
        "kernel": platform.release() or Unknown("platform reports no kernel release"),
        "virtualization": detect_virtualization(virt_output, cpu["hypervisor"], container_file, markers),
        "secure_boot": read_secure_boot(),
        "iommu_enabled": groups if isinstance(groups, Unknown) else groups > 0,
        "iommu_groups": groups,
        "uptime_s": uptime if isinstance(uptime, Unknown) else parse_uptime(uptime),
        "cpu_virt_ext": cpu["cpu_virt_ext"],
        "kvm_device": kvm_device(platform.system()),
        "default_target": default_target(),
        "desktop_sessions": desktop_sessions(platform.system()),
    }
    if platform.system() == "Darwin":
        facts.update(macos_facts())
    return facts


def default_target() -> str | Unknown:
    """systemd's boot target. Not a sign of a desktop: systemd ships default.target linked to
    graphical.target, so stock Debian and Ubuntu servers report it too."""
    res = run_command(["systemctl", "get-default"], timeout=1.0)
    if isinstance(res, Unknown):
        return res
    answer = res.stdout.strip()
    if res.returncode != 0 or not answer.endswith(".target"):
        return Unknown(f"systemctl get-default: {(res.stderr or answer).strip()[:120] or 'no answer'}")
    return answer


SESSION_DIRS = ("/usr/share/xsessions", "/usr/share/wayland-sessions")
"""Where desktop environments install the sessions a display manager offers (freedesktop.org
convention; gnome-session, plasma-workspace, xfce4-session... each ship a .desktop entry)."""
MAX_SESSIONS = 32


def desktop_sessions(kernel: str, root: str = "/") -> list[str] | Unknown:
    """The desktop sessions installed (names of the .desktop entries): a desktop environment's
    packages, whether or not anyone logs in. ``root`` reads another tree (a container's rootfs)."""
    if kernel != "Linux":
        return Unknown(f"{kernel}: desktop sessions are X11/Wayland entries of Linux desktops; none to list here")
    found: set[str] = set()
    for directory in SESSION_DIRS:
        path = os.path.join(root, directory.lstrip("/"))
        try:
            names = os.listdir(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return Unknown(f"cannot list {directory}: {exc.strerror or exc}")
        found.update(name.removesuffix(".desktop")[:64] for name in names if name.endswith(".desktop"))
    return sorted(found)[:MAX_SESSIONS]


def kvm_device(kernel: str, path: str = KVM_DEVICE) -> bool | Unknown:
    """Whether /dev/kvm exists: KVM is usable by a hypervisor on this kernel right now."""
    if kernel != "Linux":
        return False  # KVM is a Linux kernel module; no other kernel has it
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        return Unknown(f"cannot stat {path}: {exc.strerror or exc}")
    return True


def macos_facts() -> dict[str, Any]:
    """macOS has no os-release or /proc: its release and CPU come from the platform and sysctl."""
    release = platform.mac_ver()[0]
    brand = run_command(["sysctl", "-n", "machdep.cpu.brand_string"], timeout=1.0)
    model: str | Unknown = (
        brand if isinstance(brand, Unknown)
        else brand.stdout.strip() or Unknown("sysctl machdep.cpu.brand_string printed nothing")
    )
    return {
        "os_id": "macos",
        "os_version_id": release or Unknown("platform.mac_ver() reports no release"),
        "os_pretty": f"macOS {release}" if release else Unknown("platform.mac_ver() reports no release"),
        "cpu_model": model,
    }
