"""Host collectors (gpu, system, power, storage): parsers on recorded inputs, NVML scenarios
through a stand-in for the GPU that this machine lacks, and each collector run for real."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pynvml as real_nvml
import pytest

from hostcheck.collectors import (
    CollectContext,
    collect_facts,
    gpu,
    load_collectors,
    network_local,
    power,
    storage,
    system,
)
from hostcheck.facts import Unknown, to_jsonable
from tests.nvml_standin import NOT_SUPPORTED, Fail, FakeNvml, laptop_3080ti, server_a100

MIB = 1024 * 1024
REPO = Path(__file__).resolve().parents[3]


def test_nvml_laptop_3080ti_exact_facts() -> None:
    fake = FakeNvml([laptop_3080ti()])
    facts = gpu.nvml_facts(fake)
    unsupported = Unknown("not supported by this GPU/driver")
    thermal = facts["devices"][0]["thermal_slowdown"]  # times from this machine's clock, checked below
    assert thermal["total"] == 1800.0
    assert ("nvmlDeviceGetViolationStatus", 0, gpu.NVML_PERF_POLICY_THERMAL) in fake.calls
    assert facts == {
        "nvml": {"available": True, "reason": None},
        "driver_version": "580.95.05",
        "cuda_driver_version": "13.2",
        "nvml_version": "13.580.95.05",
        "devices": [
            {
                "index": 0,
                "name": "NVIDIA GeForce RTX 3080 Ti Laptop GPU",
                "uuid": "GPU-6c3d8a0e-5b1f-2f44-91e1-4f3c2a7d9b10",
                "serial": unsupported,
                "pci_bus_id": "00000000:01:00.0",
                "vram_total_mib": 16384,
                "vram_used_mib": 1093,
                "power_limit_w": 45.0,
                "power_default_w": 125.0,
                "power_min_w": 35.0,
                "power_max_w": 150.0,
                "power_draw_w": 38.5,
                "temperature_c": 81,
                "slowdown_temp_c": 98,
                "pcie_gen_current": 1,
                "pcie_gen_max": 4,
                "pcie_width_current": 8,
                "pcie_width_max": 16,
                "ecc_enabled": unsupported,
                "persistence_mode": False,
                "display_active": False,
                "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"],
                "thermal_slowdown": thermal,
                "mig_mode": unsupported,
                "architecture": "ampere",
                "compute_capability": "8.6",
            }
        ],
    }
    assert fake.calls[0] == ("nvmlInit",) and fake.calls[-1] == ("nvmlShutdown",)
    assert ("nvmlDeviceGetTemperature", 0, real_nvml.NVML_TEMPERATURE_GPU) in fake.calls
    assert (
        "nvmlDeviceGetTemperatureThreshold",
        0,
        real_nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
    ) in fake.calls


def test_thermal_slowdown_counts_from_the_boot(tmp_path: Path) -> None:
    uptime = tmp_path / "uptime"
    uptime.write_text("86400.00 170000.00\n")  # up one day
    counter = gpu.thermal_slowdown(SimpleNamespace(referenceTime=0, violationTime=3600 * 10**9), uptime)
    assert isinstance(counter, dict) and counter["total"] == 3600.0
    since, read_at = (datetime.fromisoformat(counter[k]) for k in ("since", "read_at"))
    assert abs((read_at - since).total_seconds() - 86400) <= 1
    assert abs(read_at.timestamp() - time.time()) <= 5
    unsupported = Unknown("not supported by this GPU/driver")
    assert gpu.thermal_slowdown(unsupported, uptime) is unsupported
    missing = gpu.thermal_slowdown(SimpleNamespace(violationTime=1), tmp_path / "none")
    assert isinstance(missing, Unknown) and "boot" in missing.reason
    assert isinstance(gpu.thermal_slowdown(SimpleNamespace(), uptime), Unknown)


def test_nvml_not_supported_fields_and_fallbacks() -> None:
    """A desktop GeForce on an old driver: unsupported fields are Unknown, the rest falls back."""
    card = laptop_3080ti()
    card.update(
        {
            "nvmlDeviceGetName": "NVIDIA GeForce RTX 2070",
            "nvmlDeviceGetEnforcedPowerLimit": NOT_SUPPORTED,
            "nvmlDeviceGetPowerManagementLimit": 175000,
            "nvmlDeviceGetPowerManagementDefaultLimit": 175000,
            "nvmlDeviceGetPowerManagementLimitConstraints": NOT_SUPPORTED,
            "nvmlDeviceGetPowerUsage": NOT_SUPPORTED,
            "nvmlDeviceGetTemperatureThreshold": NOT_SUPPORTED,
            "nvmlDeviceGetCurrentClocksEventReasons": Fail(real_nvml.NVML_ERROR_FUNCTION_NOT_FOUND),
            "nvmlDeviceGetCurrentClocksThrottleReasons": 0x0,
            "nvmlDeviceGetPersistenceMode": Fail(real_nvml.NVML_ERROR_NO_PERMISSION),
        }
    )
    device = gpu.nvml_facts(FakeNvml([card]))["devices"][0]
    unsupported = Unknown("not supported by this GPU/driver")
    assert device["power_limit_w"] == 175.0  # enforced limit unsupported: the configured one
    assert device["power_default_w"] == 175.0
    assert device["power_min_w"] == unsupported and device["power_max_w"] == unsupported
    assert device["power_draw_w"] == unsupported
    assert device["slowdown_temp_c"] == unsupported
    assert device["serial"] == unsupported and device["ecc_enabled"] == unsupported
    assert device["throttle_reasons"] == []
    assert device["persistence_mode"] == Unknown("NVML nvmlDeviceGetPersistenceMode: permission denied")
    assert "is_laptop" not in device  # judged by GPU-1060 from the name and the chassis


def test_nvml_gpu_lost_mid_query_only_that_device() -> None:
    lost = server_a100("00000000:41:00.0", "GPU-bbbb")
    lost["lost_at"] = "nvmlDeviceGetPowerUsage"
    fake = FakeNvml([server_a100("00000000:01:00.0", "GPU-aaaa"), lost])
    facts = gpu.nvml_facts(fake)
    good, gone = facts["devices"]
    assert good["power_draw_w"] == 61.2 and good["ecc_enabled"] is True and good["mig_mode"] is True
    assert good["throttle_reasons"] == ["gpu_idle"] and good["pci_bus_id"] == "00000000:01:00.0"
    lost_reason = Unknown(
        "GPU is lost (fell off the bus during nvmlDeviceGetPowerUsage); its readings are unusable"
    )
    identity = {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-bbbb",
                "serial": "1322721045678", "pci_bus_id": "00000000:41:00.0"}  # fmt: skip
    assert gone == {**identity, **{k: lost_reason for k in gpu.DEVICE_FIELDS if k not in identity}}
    assert fake.calls[-1] == ("nvmlShutdown",)  # the session is closed even after a loss


def test_nvml_gpu_lost_before_any_reading() -> None:
    card = laptop_3080ti()
    card["lost_at"] = "nvmlDeviceGetHandleByIndex"
    facts = gpu.nvml_facts(FakeNvml([card]))
    device = facts["devices"][0]
    assert device["index"] == 0
    assert all(isinstance(device[k], Unknown) for k in gpu.DEVICE_FIELDS)
    assert "GPU is lost" in device["name"].reason


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (real_nvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library libnvidia-ml.so.1 not found (no NVIDIA driver installed)"),
        (real_nvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVIDIA kernel driver is not loaded"),
        (real_nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
         "NVML library and kernel driver versions differ (reboot after a driver update?)"),
        (real_nvml.NVML_ERROR_UNKNOWN, "nvmlInit failed: Unknown Error"),
    ],
)  # fmt: skip
def test_nvml_init_failure_is_unavailable_without_shutdown(code: int, reason: str) -> None:
    fake = FakeNvml([laptop_3080ti()], init_error=code)
    facts = gpu.nvml_facts(fake)
    assert facts["nvml"] == {"available": False, "reason": reason}
    gone = Unknown(f"NVML unavailable: {reason}")
    assert [facts[k] for k in ("driver_version", "cuda_driver_version", "nvml_version", "devices")] == [
        gone
    ] * 4
    assert fake.calls == [("nvmlInit",)]


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_present(), reason="this machine has an NVIDIA driver")
def test_real_pynvml_without_library_reports_library_missing() -> None:
    """Without an NVIDIA driver the real binding fails the way it does on any GPU-less host."""
    facts = gpu.nvml_facts(real_nvml)
    assert facts["nvml"] == {
        "available": False,
        "reason": "NVML library libnvidia-ml.so.1 not found (no NVIDIA driver installed)",
    }


def test_binding_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now raises ImportError
    facts = gpu.collect(CollectContext())
    assert facts["nvml"]["available"] is False
    assert facts["nvml"]["reason"].startswith("nvidia-ml-py (pynvml) is not installed")
    assert isinstance(facts["devices"], Unknown)


def test_gpu_helpers() -> None:
    assert gpu.cuda_version_string(13020) == "13.2"
    assert gpu.cuda_version_string(12040) == "12.4"
    assert gpu.cuda_version_string(11080) == "11.8"
    assert gpu.decode_throttle_reasons(0) == []
    assert gpu.decode_throttle_reasons(0x8 | 0x20 | 0x80) == [
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert gpu.decode_throttle_reasons(0x4 | 0x1000) == ["sw_power_cap", "unknown_0x1000"]


def _pci_device(root: Path, address: str, cls: str, vendor: str, device: str, driver: str | None) -> None:
    dev = root / address
    dev.mkdir(parents=True)
    (dev / "class").write_text(cls + "\n")
    (dev / "vendor").write_text(vendor + "\n")
    (dev / "device").write_text(device + "\n")
    if driver:
        (dev / "driver").symlink_to(f"../../../bus/pci/drivers/{driver}")


def test_display_adapters_from_sysfs_tree(tmp_path: Path) -> None:
    _pci_device(tmp_path, "0000:00:02.0", "0x030000", "0x8086", "0x46a6", "i915")
    _pci_device(tmp_path, "0000:01:00.0", "0x030000", "0x10DE", "0x2420", "nvidia")
    _pci_device(tmp_path, "0000:01:00.1", "0x040300", "0x10de", "0x228b", "snd_hda_intel")  # HDMI audio
    _pci_device(tmp_path, "0000:02:00.0", "0x030200", "0x10de", "0x20b2", None)  # 3D controller, unbound
    _pci_device(tmp_path, "0000:03:00.0", "0x030000", "0x1a03", "0x2000", "ast")  # BMC graphics
    _pci_device(tmp_path, "0000:04:00.0", "0x020000", "0x8086", "0x15f3", "igc")
    assert gpu.scan_display_adapters(tmp_path) == [
        {"pci_address": "0000:00:02.0", "vendor_id": "0x8086", "vendor": "intel", "device_id": "0x46a6", "driver": "i915"},
        {"pci_address": "0000:01:00.0", "vendor_id": "0x10de", "vendor": "nvidia", "device_id": "0x2420", "driver": "nvidia"},
        {"pci_address": "0000:02:00.0", "vendor_id": "0x10de", "vendor": "nvidia", "device_id": "0x20b2", "driver": None},
        {"pci_address": "0000:03:00.0", "vendor_id": "0x1a03", "vendor": "other", "device_id": "0x2000", "driver": "ast"},
    ]  # fmt: skip
    assert gpu.scan_display_adapters(tmp_path / "missing") == Unknown(
        f"cannot list {tmp_path / 'missing'}: No such file or directory"
    )


# --------------------------------------------------------------------------------------
# system

CPUINFO_I7 = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma

processor\t: 1
model name\t: Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma

processor\t: 2
model name\t: Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma

processor\t: 3
model name\t: Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma
"""

CPUINFO_VM_CELERON = """\
processor\t: 0
model name\t: Intel(R) Celeron(R) N4020 CPU @ 1.10GHz
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 hypervisor

processor\t: 1
model name\t: Intel(R) Celeron(R) N4020 CPU @ 1.10GHz
physical id\t: 1
core id\t\t: 0
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 hypervisor
"""

CPUINFO_ARM = """\
processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
CPU revision\t: 1

processor\t: 1
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid
CPU implementer\t: 0x41
CPU part\t: 0xd0c
"""


def test_parse_cpuinfo() -> None:
    assert system.parse_cpuinfo(CPUINFO_I7) == {
        "cpu_model": "Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz",
        "cpu_avx": True,
        "cpu_logical_cores": 4,
        "cpu_physical_cores": 2,
        "hypervisor": False,
        "cpu_virt_ext": None,  # this recorded flags line is cut short before vmx
    }
    assert system.parse_cpuinfo(CPUINFO_VM_CELERON) == {
        "cpu_model": "Intel(R) Celeron(R) N4020 CPU @ 1.10GHz",
        "cpu_avx": False,
        "cpu_logical_cores": 2,
        "cpu_physical_cores": 2,  # two sockets of one core each, as VMs often present
        "hypervisor": True,
        "cpu_virt_ext": None,  # a guest without nested virtualisation
    }
    assert system.parse_cpuinfo(CPUINFO_ARM) == {
        "cpu_model": "CPU implementer 0x41, part 0xd0c",
        "cpu_avx": False,
        "cpu_logical_cores": 2,
        "cpu_physical_cores": Unknown("/proc/cpuinfo has no physical id/core id"),
        "hypervisor": False,
        "cpu_virt_ext": None,
    }
    empty = system.parse_cpuinfo("")
    assert empty["cpu_logical_cores"] == Unknown("/proc/cpuinfo lists no processor")


def test_parse_meminfo() -> None:
    text = "MemTotal:       24683652 kB\nMemFree:        23862400 kB\nHugePages_Total:       0\n"
    info = system.parse_meminfo(text)
    assert info == {"MemTotal": 24683652, "MemFree": 23862400, "HugePages_Total": 0}
    assert system.ram_total_mib(info) == 24105
    assert system.ram_total_mib({}) == Unknown("/proc/meminfo has no MemTotal")


def test_parse_os_release() -> None:
    text = textwrap.dedent("""\
        # Ubuntu's file, plus quoting os-release(5) allows
        PRETTY_NAME="Ubuntu 22.04.4 LTS"
        NAME="Ubuntu"
        VERSION_ID="22.04"
        ID=ubuntu
        ID_LIKE=debian
        VARIANT='Server Edition'
        HOME_URL="https://www.ubuntu.com/"
        ESCAPED="say \\"hi\\""
        BROKEN="unterminated
        not a line
        """)
    assert system.parse_os_release(text) == {
        "PRETTY_NAME": "Ubuntu 22.04.4 LTS",
        "NAME": "Ubuntu",
        "VERSION_ID": "22.04",
        "ID": "ubuntu",
        "ID_LIKE": "debian",
        "VARIANT": "Server Edition",
        "HOME_URL": "https://www.ubuntu.com/",
        "ESCAPED": 'say "hi"',
        "BROKEN": "unterminated",
    }


def test_parse_uptime_and_secure_boot_var() -> None:
    assert system.parse_uptime("278.07 460.54\n") == 278.1
    assert system.parse_uptime("") == Unknown("unreadable /proc/uptime ''")
    assert system.parse_secure_boot_var(b"\x06\x00\x00\x00\x01") is True
    assert system.parse_secure_boot_var(b"\x06\x00\x00\x00\x00") is False
    assert system.parse_secure_boot_var(b"\x06") == Unknown("SecureBoot variable has 1 bytes, expected 5")


def test_secure_boot_from_firmware_tree(tmp_path: Path) -> None:
    bios = tmp_path / "bios"
    (bios / "acpi").mkdir(parents=True)
    assert system.read_secure_boot(bios) is False

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    assert system.read_secure_boot(hidden) == Unknown(f"{hidden} is not visible (hidden in this container?)")

    uefi = tmp_path / "uefi"
    efivars = uefi / "efi" / "efivars"
    efivars.mkdir(parents=True)
    assert system.read_secure_boot(uefi) == Unknown(f"{efivars} is empty (efivarfs not mounted?)")
    (efivars / "BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c").write_bytes(b"\x07\x00\x00\x00\x01\x00")
    assert system.read_secure_boot(uefi) is False  # UEFI without the variable: no Secure Boot
    (efivars / system.SECURE_BOOT_VAR).write_bytes(b"\x06\x00\x00\x00\x01")
    assert system.read_secure_boot(uefi) is True


def test_iommu_groups_tree(tmp_path: Path) -> None:
    groups = tmp_path / "kernel" / "iommu_groups"
    for n in range(3):
        (groups / str(n)).mkdir(parents=True)
    assert system.read_iommu_groups(groups) == 3
    assert system.read_iommu_groups(tmp_path / "nothing" / "iommu_groups") == Unknown(
        f"{tmp_path / 'nothing'} is not visible"
    )


def test_detect_virtualization() -> None:
    assert system.detect_virtualization("kvm\n", True, Unknown("absent"), []) == "kvm"
    assert system.detect_virtualization("none\n", False, Unknown("absent"), []) == "none"
    assert (
        system.detect_virtualization(
            Unknown("'systemd-detect-virt' is not installed"), True, "systemd-nspawn\n", []
        )
        == "systemd-nspawn"
    )
    assert system.detect_virtualization(Unknown("x"), False, Unknown("absent"), ["docker"]) == "docker"
    assert system.detect_virtualization(Unknown("x"), True, Unknown("absent"), []) == "vm"
    assert system.detect_virtualization(Unknown("x"), False, Unknown("absent"), []) == "none"
    assert isinstance(
        system.detect_virtualization(Unknown("x"), Unknown("no flags"), Unknown("absent"), []), Unknown
    )


# --------------------------------------------------------------------------------------
# power


def test_chassis() -> None:
    assert power.parse_chassis_type("10\n") == 10
    assert power.parse_chassis_type("\n") == Unknown("unreadable DMI chassis type ''")
    assert [power.chassis_kind(c) for c in (9, 10, 31, 3, 35, 17, 23, 1, 2)] == [
        "laptop", "laptop", "laptop", "desktop", "desktop", "server", "server", "other", "other",
    ]  # fmt: skip


def test_read_chassis_file(tmp_path: Path) -> None:
    (tmp_path / "chassis_type").write_text("23\n")
    assert power.read_chassis(tmp_path / "chassis_type") == ("server", 23)
    kind, code = power.read_chassis(tmp_path / "absent")
    assert isinstance(kind, Unknown) and kind == code and "does not exist" in kind.reason


def test_parse_power_supply_laptop_on_battery() -> None:
    supplies = {
        "AC": {"type": "Mains", "online": "0"},
        "BAT0": {"type": "Battery", "capacity": "87", "status": "Discharging", "present": "1"},
        "hidpp_battery_0": {"type": "Battery", "scope": "Device", "capacity": "40", "status": "Discharging"},
    }
    assert power.parse_power_supply(supplies) == {
        "battery_present": True,
        "on_ac": False,
        "batteries": [{"name": "BAT0", "capacity_pct": 87, "status": "Discharging"}],
    }


def test_parse_power_supply_other_cases() -> None:
    assert power.parse_power_supply({}) == {"battery_present": False, "on_ac": True, "batteries": []}
    usb_c = {
        "BAT1": {"type": "Battery", "capacity": "100", "status": "Full"},
        "ucsi-source-psy-USBC000:001": {"type": "USB", "online": "1"},
    }
    assert power.parse_power_supply(usb_c)["on_ac"] is True
    mouse_only = {"hidpp_battery_0": {"type": "Battery", "scope": "Device", "status": "Discharging"}}
    assert power.parse_power_supply(mouse_only) == {"battery_present": False, "on_ac": True, "batteries": []}
    silent = {"BAT0": {"type": "Battery"}}
    facts = power.parse_power_supply(silent)
    assert facts["batteries"] == [
        {
            "name": "BAT0",
            "capacity_pct": Unknown("BAT0 capacity not reported"),
            "status": Unknown("BAT0 status not reported"),
        }
    ]
    assert isinstance(facts["on_ac"], Unknown)


def test_read_power_supplies_tree(tmp_path: Path) -> None:
    for name, attrs in {
        "AC": {"type": "Mains", "online": "1"},
        "BAT0": {"type": "Battery", "capacity": "55", "status": "Charging"},
    }.items():
        (tmp_path / name).mkdir()
        for attr, value in attrs.items():
            (tmp_path / name / attr).write_text(value + "\n")
    supplies = power.read_power_supplies(tmp_path)
    assert supplies == {
        "AC": {"type": "Mains", "online": "1"},
        "BAT0": {"type": "Battery", "capacity": "55", "status": "Charging"},
    }
    assert power.parse_power_supply(supplies)["on_ac"] is True


def test_parse_is_enabled() -> None:
    assert power.parse_is_enabled("masked\nmasked\nstatic\nenabled\n", power.SLEEP_TARGETS) == {
        "sleep.target": "masked",
        "suspend.target": "masked",
        "hibernate.target": "static",
        "hybrid-sleep.target": "enabled",
    }
    assert power.parse_is_enabled("static\n", power.SLEEP_TARGETS) is None


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="needs systemctl (CI image has systemd)")
def test_sleep_targets_real_systemctl() -> None:
    """systemctl reads unit files even when systemd is not PID 1; we only trust them when it is."""
    answer = power.sleep_targets(systemd_running=True)
    assert set(answer) == set(power.SLEEP_TARGETS)
    assert all(isinstance(v, str) and v for v in answer.values())
    not_init = power.sleep_targets(systemd_running=False)
    assert isinstance(not_init, Unknown)
    assert not_init.reason.startswith("systemd is not the running init")
    assert all(f"{unit}={state}" in not_init.reason for unit, state in answer.items())


# --------------------------------------------------------------------------------------
# storage

MOUNTINFO = """\
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
26 1 253:1 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw,errors=remount-ro
27 26 259:2 / /boot rw,relatime shared:61 - ext4 /dev/nvme0n1p2 rw
28 27 259:1 / /boot/efi rw,relatime shared:62 - vfat /dev/nvme0n1p1 rw,fmask=0077,dmask=0077
29 26 8:1 / /var/lib/docker rw,relatime shared:63 master:1 - xfs /dev/sda1 rw,attr2,inode64,logbufs=8,prjquota
30 26 0:45 /@home /home rw,relatime shared:64 - btrfs /dev/sdb1 rw,space_cache=v2,subvolid=257,subvol=/@home
31 26 0:46 / /run/user/1000 rw,nosuid,nodev shared:300 - tmpfs tmpfs rw,size=1620000k,mode=700
32 26 7:3 / /snap/core22/1380 ro,nodev,relatime shared:70 - squashfs /dev/loop3 ro
33 26 253:1 /srv/share /mnt/with\\040space rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw
34 26 0:50 / /mnt/nas rw,relatime - nfs4 nas:/export rw,vers=4.2
broken line without separator
"""


def test_parse_mountinfo() -> None:
    mounts = storage.parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 10
    assert mounts[1] == {
        "maj_min": "253:1",
        "root": "/",
        "mountpoint": "/",
        "mount_options": ["rw", "relatime"],
        "fstype": "ext4",
        "source": "/dev/mapper/vg-root",
        "super_options": ["rw", "errors=remount-ro"],
    }
    docker = mounts[4]
    assert (docker["mountpoint"], docker["fstype"], docker["source"]) == (
        "/var/lib/docker",
        "xfs",
        "/dev/sda1",
    )
    assert "prjquota" in docker["super_options"]
    assert mounts[8]["mountpoint"] == "/mnt/with space" and mounts[8]["root"] == "/srv/share"
    assert [m["mountpoint"] for m in mounts if storage.is_storage_mount(m)] == [
        "/", "/boot", "/boot/efi", "/var/lib/docker", "/home",
    ]  # fmt: skip
    assert storage.containing_mount("/var/lib/docker/overlay2", mounts)["mountpoint"] == "/var/lib/docker"
    assert storage.containing_mount("/var/lib", mounts)["mountpoint"] == "/"
    assert storage.containing_mount("/home/alice", mounts)["fstype"] == "btrfs"


LSBLK_LAPTOP = json.dumps(
    {
        "blockdevices": [
            {"name": "sda", "type": "disk", "fstype": None, "mountpoint": None, "rota": True, "pkname": None,
             "maj:min": "8:0", "children": [
                {"name": "sda1", "type": "part", "fstype": "xfs", "mountpoint": "/var/lib/docker", "rota": True,
                 "pkname": "sda", "maj:min": "8:1"}]},
            {"name": "nvme0n1", "type": "disk", "fstype": None, "mountpoint": None, "rota": False, "pkname": None,
             "maj:min": "259:0", "children": [
                {"name": "nvme0n1p1", "type": "part", "fstype": "vfat", "mountpoint": "/boot/efi", "rota": False,
                 "pkname": "nvme0n1", "maj:min": "259:1"},
                {"name": "nvme0n1p2", "type": "part", "fstype": "ext4", "mountpoint": "/boot", "rota": False,
                 "pkname": "nvme0n1", "maj:min": "259:2"},
                {"name": "nvme0n1p3", "type": "part", "fstype": "crypto_LUKS", "mountpoint": None, "rota": False,
                 "pkname": "nvme0n1", "maj:min": "259:3", "children": [
                    {"name": "luks-3f1c", "type": "crypt", "fstype": "LVM2_member", "mountpoint": None,
                     "rota": False, "pkname": "nvme0n1p3", "maj:min": "253:0", "children": [
                        {"name": "vg-root", "type": "lvm", "fstype": "ext4", "mountpoint": "/", "rota": False,
                         "pkname": "luks-3f1c", "maj:min": "253:1"},
                        {"name": "vg-swap", "type": "lvm", "fstype": "swap", "mountpoint": "[SWAP]",
                         "rota": False, "pkname": "luks-3f1c", "maj:min": "253:2"}]}]}]},
            {"name": "zram0", "type": "disk", "fstype": None, "mountpoint": "[SWAP]", "rota": False,
             "pkname": None, "maj:min": "252:0"},
        ]
    }
)  # fmt: skip


def test_parse_lsblk_json_tree() -> None:
    index = storage.parse_lsblk_json(LSBLK_LAPTOP)
    assert {
        name: (d["type"], d["encrypted"], d["rotational"], d["maj_min"]) for name, d in index.items()
    } == {
        "sda": ("disk", False, True, "8:0"),
        "sda1": ("part", False, True, "8:1"),
        "nvme0n1": ("disk", False, False, "259:0"),
        "nvme0n1p1": ("part", False, False, "259:1"),
        "nvme0n1p2": ("part", False, False, "259:2"),
        "nvme0n1p3": ("part", False, False, "259:3"),
        "luks-3f1c": ("crypt", True, False, "253:0"),
        "vg-root": ("lvm", True, False, "253:1"),
        "vg-swap": ("lvm", True, False, "253:2"),
        "zram0": ("disk", False, False, "252:0"),
    }


def test_parse_lsblk_json_list_form_old_rota_and_raid() -> None:
    """--list output (parents only via PKNAME), util-linux < 2.33 "rota": "1", and RAID1 of two disks."""
    text = json.dumps(
        {
            "blockdevices": [
                {"name": "sdb", "type": "disk", "rota": "1", "pkname": None},
                {"name": "sdc", "type": "disk", "rota": "1", "pkname": None},
                {"name": "md0", "type": "raid1", "rota": "1", "pkname": "sdb"},
                {"name": "md0", "type": "raid1", "rota": "1", "pkname": "sdc"},
                {"name": "cryptdata", "type": "crypt", "rota": "1", "pkname": "md0"},
                {"name": "data", "type": "lvm", "rota": "1", "pkname": "cryptdata"},
                {"name": "sdd", "type": "disk", "rota": None, "pkname": None},
            ]
        }
    )
    index = storage.parse_lsblk_json(text)
    assert index["data"]["encrypted"] is True and index["data"]["rotational"] is True
    assert index["md0"]["encrypted"] is False
    assert index["sdd"]["rotational"] == Unknown("rotational flag not reported")
    assert storage.parse_lsblk_json("{}") == Unknown("lsblk JSON has no 'blockdevices' list")


def test_parse_swaps() -> None:
    text = (
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/dm-2                               partition\t8388604\t\t0\t\t-2\n"
        "/swap\\040file                          file\t\t2097148\t\t0\t\t-3\n"
        "/dev/zram0                              partition\t4194300\t\t1024\t\t100\n"
    )
    assert storage.parse_swaps(text) == [
        {"filename": "/dev/dm-2", "type": "partition"},
        {"filename": "/swap file", "type": "file"},
        {"filename": "/dev/zram0", "type": "partition"},
    ]
    assert storage.parse_swaps("Filename Type Size Used Priority\n") == []


def test_mount_facts_from_lsblk_index() -> None:
    """Encryption and rotation of each mount, from the recorded tree (no statvfs involved)."""
    mounts = storage.parse_mountinfo(MOUNTINFO)
    index = storage.parse_lsblk_json(LSBLK_LAPTOP)
    blocks = {
        m["mountpoint"]: storage._mount_block(m, index) for m in mounts if not m["maj_min"].startswith("0:")
    }
    assert blocks["/"]["encrypted"] is True and blocks["/"]["rotational"] is False
    assert blocks["/var/lib/docker"]["encrypted"] is False and blocks["/var/lib/docker"]["rotational"] is True
    assert blocks["/boot"]["encrypted"] is False
    tmpfs = next(m for m in mounts if m["fstype"] == "tmpfs")
    assert storage._mount_block(tmpfs, index) == Unknown(
        "/run/user/1000 (tmpfs from tmpfs) is not backed by a block device"
    )
    swaps = storage.swap_facts([{"filename": "/dev/mapper/vg-swap", "type": "partition"}], mounts, index)
    assert swaps == [{"device": "/dev/mapper/vg-swap", "encrypted": True}]


def test_docker_root_on_separate_xfs_with_quota(tmp_path: Path) -> None:
    """A synthetic mount table over a real directory: statvfs runs, the rest comes from the table."""
    real = os.path.realpath(tmp_path)
    table = (
        "26 1 253:1 / / rw,relatime - ext4 /dev/mapper/vg-root rw\n"
        f"29 26 8:1 / {real} rw,relatime - xfs /dev/sda1 rw,attr2,inode64,prjquota\n"
    )
    mounts = storage.parse_mountinfo(table)
    facts = storage.docker_root_facts(f"{real}/docker", mounts, storage.parse_lsblk_json(LSBLK_LAPTOP))
    free, size = facts.pop("free_gib"), facts.pop("size_gib")
    stat = os.statvfs(real)
    assert isinstance(free, float) and size == round(stat.f_blocks * stat.f_frsize / 2**30, 2) >= free
    assert facts == {
        "path": f"{real}/docker",
        "exists": False,
        "fstype": "xfs",
        "xfs_project_quota": True,
        "separate_mount": True,
        "encrypted": False,
        "rotational": True,
    }
    same_fs = storage.parse_mountinfo(
        "26 1 253:1 / / rw - ext4 /dev/mapper/vg-root rw\n"
        f"29 26 253:1 /srv/docker {real} rw - ext4 /dev/mapper/vg-root rw\n"  # a bind mount: same filesystem
    )
    facts = storage.docker_root_facts(real, same_fs, storage.parse_lsblk_json(LSBLK_LAPTOP))
    assert facts["separate_mount"] is False and facts["xfs_project_quota"] is False
    assert facts["exists"] is True and facts["encrypted"] is True

    why = Unknown("/etc/docker/daemon.json is not valid JSON: x")
    assert storage.docker_root_facts(why, mounts, {}) == {
        "path": why, "exists": why, "free_gib": why, "size_gib": why, "fstype": why, "xfs_project_quota": why,
        "separate_mount": why, "encrypted": why, "rotational": why,
    }  # fmt: skip


# --------------------------------------------------------------------------------------
# The real machine: each collector on this host, and the four through the runner.

SHAPES = {
    "gpu": {"nvml", "driver_version", "cuda_driver_version", "nvml_version", "devices", "display_adapters"},
    "system": {"cpu_model", "cpu_arch", "os_kernel_name", "cpu_physical_cores", "cpu_logical_cores", "cpu_avx",
               "ram_total_mib", "os_id", "os_version_id", "os_pretty", "kernel", "virtualization",
               "secure_boot", "iommu_enabled", "iommu_groups", "uptime_s", "cpu_virt_ext", "kvm_device",
               "default_target", "desktop_sessions"},
    "power": {"chassis_type", "chassis_type_code", "battery_present", "on_ac", "batteries", "sleep_targets"},
    "storage": {"filesystems", "root", "home", "docker_root", "swap"},
}  # fmt: skip


def test_collectors_run_on_this_machine() -> None:
    import psutil

    ctx = CollectContext()
    facts = {mod.SECTION: mod.collect(ctx) for mod in (gpu, system, power, storage)}
    for section, keys in SHAPES.items():
        assert set(facts[section]) == keys, section
    json.dumps(to_jsonable(facts))  # a snapshot can be written

    nvml = facts["gpu"]["nvml"]
    if _nvml_library_present():  # a GPU machine: every device answers, Unknowns carry reasons
        assert nvml == {"available": True, "reason": None}, nvml
        assert isinstance(facts["gpu"]["cuda_driver_version"], str)
        for device in facts["gpu"]["devices"]:
            assert set(device) == {"index", *gpu.DEVICE_FIELDS}
            assert isinstance(device["vram_total_mib"], int) and device["vram_total_mib"] > 0
    else:  # no NVIDIA driver: NVML says so, and says why
        assert nvml["available"] is False
        assert "libnvidia-ml.so.1 not found" in nvml["reason"]
        assert isinstance(facts["gpu"]["devices"], Unknown)
    adapters = facts["gpu"]["display_adapters"]
    assert isinstance(adapters, list)
    for adapter in adapters:
        cls = Path(f"/sys/bus/pci/devices/{adapter['pci_address']}/class").read_text()
        assert cls.startswith("0x03")

    sysf = facts["system"]
    assert sysf["cpu_logical_cores"] == os.cpu_count()
    assert sysf["cpu_physical_cores"] == psutil.cpu_count(logical=False)
    assert sysf["ram_total_mib"] == psutil.virtual_memory().total // MIB
    assert sysf["os_kernel_name"] == "Linux" and sysf["kernel"] == os.uname().release
    assert isinstance(sysf["cpu_avx"], bool) and isinstance(sysf["uptime_s"], float)
    assert isinstance(sysf["virtualization"], str) and isinstance(sysf["iommu_groups"], int)
    assert sysf["iommu_enabled"] == (sysf["iommu_groups"] > 0)

    pwr = facts["power"]
    assert isinstance(pwr["battery_present"], bool)
    if not os.path.isdir("/run/systemd/system"):
        assert isinstance(pwr["sleep_targets"], Unknown)

    sto = facts["storage"]
    root_stat = os.statvfs("/")
    assert sto["root"]["size_gib"] == round(root_stat.f_blocks * root_stat.f_frsize / 1024**3, 2)
    assert isinstance(sto["root"]["fstype"], str) and sto["root"]["fstype"]
    assert "/" in [fs["mountpoint"] for fs in sto["filesystems"]]
    assert sto["docker_root"]["path"] and isinstance(sto["docker_root"]["exists"], bool)
    assert isinstance(sto["swap"], list)


def test_collectors_through_runner() -> None:
    specs = load_collectors(tuple(f"hostcheck.collectors.{n}" for n in ("gpu", "system", "power", "storage")))
    assert {s.name: s.timeout for s in specs} == {"gpu": 4.0, "system": 2.0, "power": 2.0, "storage": 3.0}
    facts = collect_facts(CollectContext(budget_s=10.0), specs=specs)
    for section, keys in SHAPES.items():
        assert isinstance(facts[section], dict), facts[section]  # no timeout, no crash
        assert set(facts[section]) == keys
    assert set(facts["meta"]["collector_timings_s"]) == set(SHAPES)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a loop device in a private mount namespace")
def test_docker_root_on_real_separate_xfs_mount(tmp_path: Path) -> None:
    """daemon.json points data-root at a real XFS loop mount; the collector sees it as separate."""
    image, mnt = tmp_path / "xfs.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(300 * MIB)
    subprocess.run(["mkfs.xfs", "-q", str(image)], check=True)
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text(json.dumps({"data-root": f"{mnt}/docker"}))
    probe = (
        "import json, sys; from pathlib import Path; from hostcheck.collectors import storage;"
        "from hostcheck.collectors import docker_config;"
        f"docker_config.DAEMON_JSON = {str(daemon_json)!r};"
        "from hostcheck.facts import to_jsonable;"
        "print(json.dumps(to_jsonable(storage.collect(None))))"
    )
    # The mount lives only in the child's private namespace: it vanishes (and the loop
    # device is released) when the child exits, whatever happens to this test.
    script = (
        f"mount -o loop {image} {mnt} && mkdir {mnt}/docker"
        f" && cat /sys/block/$(basename $(findmnt -no SOURCE {mnt}))/queue/rotational"
        f" && {sys.executable} -c {json.dumps(probe)}"
    )
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rotational_line, facts_line = proc.stdout.splitlines()
    facts = json.loads(facts_line)
    docker = facts["docker_root"]
    assert docker["path"] == f"{mnt}/docker" and docker["exists"] is True
    assert docker["fstype"] == "xfs" and docker["separate_mount"] is True
    assert docker["xfs_project_quota"] is False  # mounted without prjquota
    assert docker["encrypted"] is False
    # A loop device takes its rotation from the disk under its image file; inside a VM a
    # "rotational" answer describes the emulated disk, so it is unknown with that reason.
    if rotational_line.strip() == "1" and storage.vm_guest():
        assert "guest" in docker["rotational"]["$unknown"]
    else:
        assert docker["rotational"] is (rotational_line.strip() == "1")
    assert 0 < docker["free_gib"] < 0.3
    xfs = [fs for fs in facts["filesystems"] if fs["mountpoint"] == str(mnt)]
    assert len(xfs) == 1 and xfs[0]["fstype"] == "xfs" and xfs[0]["device"].startswith("/dev/loop")


# --------------------------------------------------------------------------------------
# Facts issue 9 added: GPU architecture, KVM, virtual disks, the audit's own sockets.


def test_nvml_architecture_codes_and_unknown() -> None:
    assert gpu.architecture_name(4) == "pascal"
    assert gpu.architecture_name(10) == "blackwell"
    assert gpu.architecture_name(0xFFFFFFFF) == Unknown("NVML reports the architecture as unknown")
    assert "newer than this hostcheck" in gpu.architecture_name(99).reason


def test_kvm_device_is_linux_only(tmp_path: Path) -> None:
    present = tmp_path / "kvm"
    present.write_text("")
    assert system.kvm_device("Linux", str(present)) is True
    assert system.kvm_device("Linux", str(tmp_path / "none")) is False
    assert system.kvm_device("Darwin", str(present)) is False


def test_cpuinfo_virtualisation_extension() -> None:
    text = CPUINFO_I7.replace("avx2 fma", "avx2 fma vmx")
    assert system.parse_cpuinfo(text)["cpu_virt_ext"] == "vmx"
    assert system.parse_cpuinfo(CPUINFO_I7.replace("avx2 fma", "svm"))["cpu_virt_ext"] == "svm"


def test_virtio_disk_rotational_flag_is_not_trusted() -> None:
    """virtio-blk reports rotational=1 whatever the host stores it on: unknown, never 'HDD'."""
    lsblk = json.dumps({"blockdevices": [
        {"name": "vda", "type": "disk", "rota": True, "maj:min": "253:0", "children": [
            {"name": "vda1", "type": "part", "rota": True, "maj:min": "253:1"}]},
        {"name": "sda", "type": "disk", "rota": True, "maj:min": "8:0"},
        {"name": "nvme0n1", "type": "disk", "rota": False, "maj:min": "259:0"},
    ]})  # fmt: skip
    index = storage.distrust_virtual_rotational(storage.parse_lsblk_json(lsblk), None)
    assert isinstance(index["vda1"]["rotational"], Unknown)
    assert "vda is a virtual disk" in index["vda1"]["rotational"].reason
    assert index["sda"]["rotational"] is True  # bare metal: a real HDD stays an HDD
    assert index["nvme0n1"]["rotational"] is False
    in_vm = storage.distrust_virtual_rotational(storage.parse_lsblk_json(lsblk), "kvm")
    assert "inside a kvm guest" in in_vm["sda"]["rotational"].reason
    assert in_vm["nvme0n1"]["rotational"] is False


def test_own_sockets_are_not_listed_as_services() -> None:
    """OWN-1040 once listed hostcheck's own STUN socket: a socket of this process is never listed."""
    import socket as socket_module

    sock = socket_module.socket(socket_module.AF_INET, socket_module.SOCK_DGRAM)
    try:
        sock.bind(("0.0.0.0", 0))
        port = sock.getsockname()[1]
        listening = network_local.collect_listening()
        assert not isinstance(listening, Unknown)
        assert all(s["port"] != port for s in listening if s["proto"] == "udp")
        inode = str(os.fstat(sock.fileno()).st_ino)
        assert inode in network_local.own_socket_inodes()
        proc_text = Path("/proc/net/udp").read_text()
        with_own = network_local.parse_proc_net_sockets(proc_text, "udp", 4)
        without = network_local.parse_proc_net_sockets(proc_text, "udp", 4, frozenset({inode}))
        assert any(s["port"] == port for s in with_own)
        assert all(s["port"] != port for s in without)
    finally:
        sock.close()
