"""Checks are pure functions of facts and a threshold: a table pins their exact outcomes,
including the edges where a fact is unknown (never a pass)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.checks.base import compare
from hostcheck.facts import Unknown, load_snapshot, to_jsonable
from hostcheck.judge import run_check
from hostcheck.knowledge.sudoers import includes, matching
from tests.helpers import SNAPSHOTS

REGISTRY = load_registry()


def gpu(**fields: Any) -> dict[str, Any]:
    device = {"index": 0, "name": "NVIDIA GeForce RTX 4090", "vram_total_mib": 24564, "vram_used_mib": 3,
              "power_limit_w": 450.0, "power_default_w": 450.0, "pcie_gen_max": 4, "pcie_width_current": 16,
              "throttle_reasons": [], "display_active": False, "persistence_mode": True,
              "architecture": "ada", "compute_capability": "8.9"}
    device.update(fields)
    return {"gpu": {"nvml": {"available": True, "reason": None}, "devices": [device], "display_adapters": []}}


DAY_S = 86400


def counter(total_s: float, covered_s: int) -> dict[str, Any]:
    """A counter fact that counted ``total_s`` over the ``covered_s`` seconds before 2026-12-02."""
    read_at = datetime(2026, 12, 2, tzinfo=UTC)
    return {"total": total_s, "since": (read_at - timedelta(seconds=covered_s)).isoformat(), "read_at": read_at.isoformat()}


def container(**fields: Any) -> dict[str, Any]:
    """One running container as the docker collector records it (default: no host access)."""
    return {"name": "C.1", "network_mode": "bridge", "host_network": False, "privileged": False, "pid_mode": "",
            "ipc_mode": "private", "host_mounts": [], **fields}


CASES = [
    # (check, facts, threshold, status, measured)
    ("GPU-1050", gpu(power_limit_w=45.0, power_default_w=125.0), 0.9, "fail", 0.36),
    ("GPU-1050", gpu(power_limit_w=440.0), 0.9, "pass", 0.98),
    ("GPU-1050", gpu(power_default_w=0.0), 0.9, "unknown", None),
    ("GPU-1050", gpu(power_limit_w=Unknown("not supported by this GPU/driver")), 0.9, "unknown", None),
    ("GPU-1070", gpu(pcie_gen_max=3, pcie_width_current=1), 2.85, "fail", 0.98),
    ("GPU-1070", gpu(pcie_gen_max=3, pcie_width_current=4), 2.85, "pass", 3.94),
    ("GPU-1030", {"gpu": {"cuda_driver_version": "11.8"}}, "12.0", "fail", "11.8"),
    ("GPU-1030", {"gpu": {"cuda_driver_version": "13.2"}}, "12.0", "pass", "13.2"),
    ("GPU-1030", {"gpu": {"cuda_driver_version": Unknown("NVML unavailable")}}, "12.0", "unknown", None),
    ("GPU-1060", gpu(name="NVIDIA GeForce RTX 3080 Ti Laptop GPU"), None, "fail", "laptop GPU"),
    ("GPU-1060", gpu(name=Unknown("GPU lost")), None, "unknown", None),
    # GPU-1170: share = total / (read_at - since), in %: 1800 s of one day is 2.08 %
    ("GPU-1170", gpu(thermal_slowdown=counter(1800, DAY_S)), 0, "fail", round(1800 / DAY_S * 100, 2)),
    ("GPU-1170", gpu(thermal_slowdown=counter(0, DAY_S)), 0, "pass", 0.0),
    ("GPU-1170", gpu(thermal_slowdown=counter(86.4, DAY_S)), 0.1, "pass", round(86.4 / DAY_S * 100, 2)),
    ("GPU-1170", gpu(thermal_slowdown=Unknown("not supported by this GPU/driver")), 0, "unknown", None),
    ("GPU-1170", gpu(thermal_slowdown=counter(10, 0)), 0, "unknown", None),  # covers no time
    ("GPU-1010", {"gpu": {"nvml": {"available": False, "reason": "no driver"}, "display_adapters": [{"vendor": "nvidia"}]}}, 1, "fail", 0),
    ("GPU-1010", {"gpu": {"nvml": {"available": False, "reason": "no driver"}, "display_adapters": Unknown("no sysfs")}}, 1, "unknown", None),
    # macOS: NVIDIA's CUDA 10.2 release notes make it the last release to support macOS; no driver, no PCI listing needed
    ("GPU-1010", {"gpu": {"nvml": {"available": False, "reason": "no driver"}, "display_adapters": Unknown("no sysfs")}, "system": {"os_kernel_name": "Darwin"}}, 1, "fail", 0),
    ("PWR-1030", {"power": {"sleep_targets": {"sleep.target": "masked", "suspend.target": Unknown("no systemd")}}}, None, "unknown", None),
    ("PWR-1030", {"power": {"sleep_targets": {"sleep.target": "masked", "suspend.target": "static"}}}, None, "fail", "1 not masked"),
    ("PWR-1020", {"power": {"battery_present": True, "on_ac": False}}, None, "fail", "on battery"),
    ("PWR-1020", {"power": {"battery_present": False, "on_ac": Unknown("no mains supply listed")}}, None, "pass", "no battery"),
    ("SSH-1010", {"ssh": {"installed": False}}, None, "pass", "no sshd installed"),
    ("SSH-1010", {"ssh": {"installed": True, "source": "sshd -T", "settings": {"passwordauthentication": "yes"}}}, None, "fail", "yes"),
    ("SSH-1010", {"ssh": {"installed": True, "settings": Unknown("permission denied")}}, None, "unknown", None),
    ("SSH-1020", {"ssh": {"installed": True, "settings": {"permitrootlogin": "without-password"}}}, None, "pass", "without-password"),
    ("DOC-1020", {"docker": {"reachable": False, "unreachable_reason": "permission_denied", "no_new_privileges": Unknown("denied"), "daemon_json": Unknown("denied")}}, None, "unknown", None),
    ("DOC-1020", {"docker": {"reachable": False, "unreachable_reason": "not_running", "daemon_json": {"no-new-privileges": True}}}, None, "pass", "on"),
    ("DOC-1070", {"docker": {"reachable": False, "unreachable_reason": "permission_denied"}}, None, "unknown", None),
    ("DOC-1070", {"docker": {"reachable": True, "published_ports": [{"host_ip": "0.0.0.0", "host_port": 8888, "proto": "tcp"}]},
                  "network": {"firewall": {"nftables": [], "iptables": {"filter": [":FORWARD ACCEPT [0:0]"], "rule_count": 0}}}},
     None, "fail", 1),
    ("DOC-1080", {"docker": {"reachable": False, "unreachable_reason": "not_running"}}, None, "fail", "Docker installed (not_running)"),
    ("NET-1040", {"network": {"inbound": {"probed": False, "ports": [], "reason": "no outside probe"}}}, 3, "unknown", None),
    ("NET-1050", {"network": {"nat": {"mapping": "address-and-port-dependent"}, "inbound": {"ports": []}}}, None, "fail", "address-and-port-dependent"),
    ("OWN-1010", {"isolation": {"credentials": [], "unreadable_homes": ["/home/sam"]}}, None, "unknown", 0),
    ("OWN-1040", {"network": {"listening": [{"proto": "tcp", "port": 22, "exposure": "all"}, {"proto": "tcp", "port": 631, "exposure": "loopback"}]},
                  "ssh": {"settings": {"port": ["22"]}}}, 0, "pass", 0),
    ("SYS-1050", {"system": {"os_id": "ubuntu", "os_version_id": "20.04"}}, ["ubuntu 18.04+"], "pass", "ubuntu 20.04"),
    ("SYS-1050", {"system": {"os_id": "ubuntu", "os_version_id": "16.04"}}, ["ubuntu 18.04+"], "fail", "ubuntu 16.04"),
    # Vast since 2026: Ubuntu 20.04 or newer (20.04 with a warning, SYS-1130), older refused.
    ("SYS-1050", {"system": {"os_id": "ubuntu", "os_version_id": "18.04"}}, ["ubuntu 20.04+"], "fail", "ubuntu 18.04"),
    ("SYS-1050", {"system": {"os_id": "ubuntu", "os_version_id": "24.04"}}, ["ubuntu 20.04+"], "pass", "ubuntu 24.04"),
    ("SYS-1130", {"system": {"os_id": "ubuntu", "os_version_id": "20.04"}}, ["ubuntu 22.04", "ubuntu 24.04"], "fail", "ubuntu 20.04"),
    ("SYS-1050", {"system": {"os_id": "debian", "os_version_id": "13"}}, ["debian 12"], "fail", "debian 13"),
    ("PLAT-1010", {}, "closed", "fail", "not accepting"),
    ("ISO-1010", {"isolation": {"graphical_session": False, "display_manager": None, "credentials": []}}, None, "pass", "no desktop, no personal data"),
    # GPU generation: NVML first, then compute capability, then the name; Apple chips; unknown.
    ("GPU-1120", gpu(architecture="pascal"), ["nvidia pascal+"], "pass", "pascal"),
    ("GPU-1120", gpu(architecture="turing", name="NVIDIA GeForce RTX 2080"), ["nvidia ampere+"], "fail", "turing"),
    ("GPU-1120", gpu(architecture=Unknown("driver too old"), compute_capability="5.2"), ["nvidia pascal+"], "fail", "maxwell"),
    # Vast's floor since 2026: Maxwell passes, Kepler does not.
    ("GPU-1120", gpu(architecture="maxwell", name="NVIDIA GeForce GTX 970"), ["nvidia maxwell+"], "pass", "maxwell"),
    ("GPU-1120", gpu(architecture="kepler", name="NVIDIA GeForce GTX 780"), ["nvidia maxwell+"], "fail", "kepler"),
    ("GPU-1120", gpu(architecture=Unknown("driver too old"), compute_capability=Unknown("no binding"), name="Tesla P40"), ["nvidia pascal+"], "pass", "pascal"),
    ("GPU-1120", gpu(architecture=Unknown("NVML reports the architecture as unknown"), compute_capability=Unknown("x"), name="NVIDIA Graphics Device"), ["nvidia pascal+"], "unknown", None),
    ("GPU-1120", {**gpu(architecture="ada"), "system": {}}, ["apple m1"], "fail", "NVIDIA GPU"),
    ("GPU-1120", {"gpu": {"devices": Unknown("NVML unavailable"), "display_adapters": Unknown("no sysfs")},
                  "system": {"os_kernel_name": "Darwin", "cpu_arch": "arm64", "cpu_model": "Apple M2 Pro"}}, ["nvidia ampere+", "apple m2"], "pass", "Apple M2"),
    ("GPU-1120", {"gpu": {"devices": Unknown("NVML unavailable"), "display_adapters": Unknown("no sysfs")},
                  "system": {"os_kernel_name": "Darwin", "cpu_arch": "arm64", "cpu_model": "Apple M4 Max"}}, ["apple m1", "apple m3"], "fail", "Apple M4"),
    ("GPU-1120", {"gpu": {"devices": Unknown("NVML unavailable"), "display_adapters": Unknown("no sysfs")},
                  "system": {"os_kernel_name": "Darwin", "cpu_arch": "x86_64"}}, ["apple m1"], "fail", "Intel Mac"),
    ("GPU-1120", {"gpu": {"devices": Unknown("NVML unavailable"), "display_adapters": [{"vendor": "amd"}]},
                  "system": {"os_kernel_name": "Linux"}}, ["nvidia pascal+"], "fail", "no NVIDIA GPU"),
    ("GPU-1120", {"gpu": {"devices": Unknown("NVML unavailable: driver not loaded"), "display_adapters": [{"vendor": "nvidia"}]},
                  "system": {"os_kernel_name": "Linux"}}, ["nvidia pascal+"], "unknown", None),  # which generation NVML could not say
    ("GPU-1120", gpu(architecture="ampere"), ["amd rdna3"], "error", None),
    # ECC only where the GPU has it.
    ("GPU-1130", gpu(ecc_enabled=True), None, "pass", "on"),
    ("GPU-1130", gpu(ecc_enabled=False), None, "fail", "off on GPU 0"),
    ("GPU-1130", gpu(ecc_enabled=Unknown("not supported by this GPU/driver")), None, "skipped", "no ECC"),
    ("GPU-1130", gpu(ecc_enabled=Unknown("NVML nvmlDeviceGetEccMode: permission denied")), None, "unknown", None),
    # VRAM free at start (Vast's self-test wants ~98 %).
    ("GPU-1140", gpu(vram_used_mib=3), 0.98, "pass", 1.0),
    ("GPU-1140", gpu(vram_used_mib=6144, vram_total_mib=24576), 0.98, "fail", 0.75),
    ("GPU-1140", gpu(vram_used_mib=Unknown("GPU is lost")), 0.98, "unknown", None),
    # Lanes per TFLOPS: an x1 riser fails, a full x16 link passes, an unlisted card is unknown.
    ("GPU-1150", gpu(name="NVIDIA GeForce RTX 3060", pcie_gen_max=3, pcie_width_current=1, pcie_width_max=1), 2.5, "fail", 12.7),
    ("GPU-1150", gpu(name="NVIDIA GeForce RTX 3090", pcie_gen_max=4, pcie_width_current=16), 2.5, "pass", 1.11),
    ("GPU-1150", gpu(pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16), 2.5, "pass", 2.5),
    ("GPU-1150", gpu(pcie_gen_max=4, pcie_width_current=8, pcie_width_max=16), 2.5, "fail", 5.17),
    ("GPU-1150", gpu(name="NVIDIA GeForce RTX 3080 Ti Laptop GPU"), 2.5, "unknown", None),
    # Salad's stock band: 94 % is above the 'power-limited' line but below stock.
    ("GPU-1160", gpu(power_limit_w=300.0, power_default_w=320.0), 1.0, "fail", 0.94),
    ("GPU-1160", gpu(power_limit_w=320.0, power_default_w=320.0), 1.0, "pass", 1.0),
    ("GPU-1020", gpu(vram_total_mib=8192), 7.4, "pass", 8.0),
    ("GPU-1020", gpu(vram_total_mib=4096), 7.4, "fail", 4.0),
    # Vast's listing floor of 4 GB: a 4 GB card (4096 MiB) is at it, a 2 GB Maxwell card below.
    ("GPU-1020", gpu(vram_total_mib=4096, name="NVIDIA GeForce GTX 970", architecture="maxwell"), 4, "pass", 4096 / 1024),
    ("GPU-1020", gpu(vram_total_mib=2048, name="NVIDIA GeForce GTX 960", architecture="maxwell"), 4, "fail", 2048 / 1024),
    ("GPU-1040", {"gpu": {"driver_version": "535.183.01"}}, "550.54.15", "fail", "535.183.01"),
    ("GPU-1040", {"gpu": {"driver_version": "550.54.15"}}, "550.54.15", "pass", "550.54.15"),
    ("GPU-1080", {"gpu": {"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3090"}, {"index": 1, "name": "NVIDIA GeForce GTX 1080 Ti"}]}}, None, "fail", 2),
    ("GPU-1080", {"gpu": {"devices": [{"index": 0, "name": "A"}, {"index": 1, "name": "A"}]}}, None, "pass", 1),
    ("GPU-1090", gpu(throttle_reasons=["gpu_idle", "hw_thermal_slowdown"]), None, "fail", "throttling"),
    ("GPU-1090", gpu(throttle_reasons=["gpu_idle"]), None, "pass", "none"),
    ("GPU-1100", gpu(display_active=True), None, "fail", "display on GPU 0"),
    ("GPU-1100", gpu(), None, "pass", "headless"),
    ("GPU-1110", gpu(persistence_mode=False), None, "fail", "off on GPU 0"),
    ("GPU-1110", gpu(), None, "pass", "on"),
    # Machine preconditions.
    ("SYS-1010", {**gpu(), "system": {"cpu_physical_cores": 8}}, 2, "pass", 8.0),
    ("SYS-1010", {"gpu": {"devices": [{"index": i} for i in range(8)]}, "system": {"cpu_physical_cores": 8}}, 2, "fail", 1.0),
    ("SYS-1020", {**gpu(), "system": {"ram_total_mib": 2048}}, 3.7, "fail", 2.0),
    ("SYS-1030", {**gpu(), "system": {"ram_total_mib": 16384}}, 0.95, "fail", 0.67),
    ("SYS-1030", {**gpu(), "system": {"ram_total_mib": 32768}}, 0.95, "pass", 1.33),
    ("SYS-1040", {"system": {"cpu_avx": False}}, None, "fail", "no AVX"),
    ("SYS-1040", {"system": {"cpu_avx": Unknown("/proc/cpuinfo has no flags line")}}, None, "unknown", None),
    ("SYS-1050", {"system": {"os_id": "macos", "os_version_id": "13.6"}}, ["macos 14+"], "fail", "macos 13.6"),
    ("SYS-1050", {"system": {"os_id": "macos", "os_version_id": "14.5"}}, ["macos 14+"], "pass", "macos 14.5"),
    ("SYS-1060", {"system": {"os_kernel_name": "Darwin", "cpu_arch": "arm64"}}, None, "pass", "Darwin arm64"),
    ("SYS-1060", {"system": {"os_kernel_name": "Darwin", "cpu_arch": "x86_64"}}, None, "fail", "Darwin x86_64"),
    ("SYS-1070", {"system": {"secure_boot": True}}, None, "fail", "on"),
    ("SYS-1070", {"system": {"secure_boot": False}}, None, "pass", "off"),
    # Vast lists x86_64 machines only; Debian's and Apple's names of the same architectures count.
    ("SYS-1150", {"system": {"cpu_arch": "x86_64"}}, ["x86_64"], "pass", "x86_64"),
    ("SYS-1150", {"system": {"cpu_arch": "amd64"}}, ["x86_64"], "pass", "amd64"),
    ("SYS-1150", {"system": {"cpu_arch": "aarch64"}}, ["x86_64"], "fail", "aarch64"),
    ("SYS-1150", {"system": {"cpu_arch": "arm64"}}, ["x86_64"], "fail", "arm64"),
    ("SYS-1150", {"system": {"cpu_arch": "arm64"}}, ["aarch64"], "pass", "arm64"),
    ("SYS-1150", {"system": {"cpu_arch": Unknown("uname failed")}}, ["x86_64"], "unknown", None),
    ("SYS-1150", {}, ["x86_64"], "unknown", None),
    ("SYS-1070", {"system": {"secure_boot": Unknown("no EFI variables")}}, None, "unknown", None),
    ("SYS-1080", {"system": {"iommu_enabled": False, "iommu_groups": 0}}, None, "fail", "0 groups"),
    ("SYS-1080", {"system": {"iommu_enabled": True, "iommu_groups": 31}}, None, "pass", "31 groups"),
    ("SYS-1090", {"gpu": {"display_adapters": [{"vendor": "nvidia"}]}}, 1, "fail", 0),
    ("SYS-1090", {"gpu": {"display_adapters": [{"vendor": "other"}, {"vendor": "nvidia"}]}}, 1, "pass", 1),
    ("SYS-1100", {"system": {"virtualization": "kvm"}}, None, "fail", "kvm"),
    ("SYS-1100", {"system": {"virtualization": "none"}}, None, "pass", "bare metal"),
    ("SYS-1110", {"system": {"ram_total_mib": 8192}}, 11.1, "fail", 8.0),
    # graphical.target is systemd's packaged default, servers included: not a desktop by itself
    ("SYS-1120", {"system": {"default_target": "graphical.target", "desktop_sessions": []}, "isolation": {"display_manager": None}}, None, "pass", "server"),
    ("SYS-1120", {"system": {"default_target": "multi-user.target"}, "isolation": {"display_manager": "gdm3"}}, None, "fail", "desktop"),
    ("SYS-1120", {"system": {"desktop_sessions": ["xfce"]}, "isolation": {"display_manager": None}}, None, "fail", "desktop"),
    ("SYS-1120", {"system": {"desktop_sessions": []}, "isolation": {"display_manager": None, "graphical_session": True}}, None, "fail", "desktop"),
    ("SYS-1120", {"system": {"default_target": "multi-user.target", "desktop_sessions": []}, "isolation": {"display_manager": None}}, None, "pass", "server"),
    ("SYS-1120", {"system": {"default_target": "multi-user.target"}, "isolation": {"display_manager": None}}, None, "unknown", None),
    ("SYS-1120", {"system": {"desktop_sessions": Unknown("cannot list /usr/share/xsessions: Permission denied")}, "isolation": {"display_manager": None}}, None, "unknown", None),
    ("SYS-1130", {"system": {"os_id": "ubuntu", "os_version_id": "20.04"}}, ["ubuntu 22.04", "ubuntu 24.04"], "fail", "ubuntu 20.04"),
    ("SYS-1130", {"system": {"os_id": "ubuntu", "os_version_id": "24.04"}}, ["ubuntu 22.04", "ubuntu 24.04"], "pass", "ubuntu 24.04"),
    ("SYS-1140", {"system": {"os_kernel_name": "Darwin"}}, None, "fail", "Darwin"),
    ("SYS-1140", {"system": {"os_kernel_name": "Linux", "kvm_device": False, "cpu_virt_ext": None}}, None, "fail", "no /dev/kvm"),
    ("SYS-1140", {"system": {"os_kernel_name": "Linux", "kvm_device": True}}, None, "pass", "Linux with /dev/kvm"),
    ("SYS-1140", {"system": {"os_kernel_name": "Linux", "kvm_device": Unknown("cannot stat /dev/kvm: Permission denied")}}, None, "unknown", None),
    # Power and storage.
    ("PWR-1010", {"power": {"chassis_type": "desktop", "battery_present": False}}, None, "pass", "desktop"),
    ("PWR-1010", {"power": {"chassis_type": "desktop", "battery_present": True}}, None, "fail", "laptop"),
    ("PWR-1010", {"power": {"chassis_type": Unknown("no DMI")}}, None, "unknown", None),
    ("STO-1010", {"storage": {"docker_root": {"exists": True, "path": "/var/lib/docker", "free_gib": 300.0}}}, 238, "pass", 300.0),
    ("STO-1010", {"storage": {"docker_root": {"exists": False}, "root": {"free_gib": 40.0}}}, 65, "fail", 40.0),
    # Whether Docker's data root exists is not known: the root filesystem's free space is no stand-in.
    ("STO-1010", {"storage": {"docker_root": {"exists": Unknown("stat failed")}, "root": {"free_gib": 400.0}}}, 65,
     "unknown", None),
    ("STO-1020", {"storage": {"docker_root": {"exists": True, "path": "/d", "rotational": True}}}, None, "fail", "HDD"),
    ("STO-1020", {"storage": {"docker_root": {"exists": True, "path": "/d",
                  "rotational": Unknown("vda is a virtual disk: its rotational flag says nothing about the storage behind it")}}}, None, "unknown", None),
    ("STO-1030", {"storage": {"docker_root": {"exists": True, "fstype": "xfs", "xfs_project_quota": True}}}, None, "pass", "xfs with prjquota"),
    ("STO-1030", {"storage": {"docker_root": {"exists": True, "fstype": "ext4", "xfs_project_quota": False}}}, None, "fail", "ext4"),
    ("STO-1040", {"storage": {"docker_root": {"exists": True, "separate_mount": False}}}, None, "fail", "on the root filesystem"),
    ("STO-1040", {"storage": {"docker_root": {"exists": True, "separate_mount": Unknown("x")}}}, None, "unknown", None),
    ("STO-1050", {"storage": {"root": {"free_gib": 12.0}}}, 20, "fail", 12.0),
    ("STO-1060", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/d", "free_gib": 100.0}}}, 119, "fail", 100.0),
    # Capacity is the size of the disk, not what is free on it: a 1 TB disk with 100 GiB free
    # passes 119 GiB per GPU on capacity (and fails STO-1060 above on free space).
    ("STO-1110", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/d", "free_gib": 100.0,
                                                       "size_gib": 931.5}}}, 119, "pass", 931.5),
    ("STO-1110", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/d", "free_gib": 100.0,
                                                       "size_gib": 110.0}}}, 119, "fail", 110.0),
    # A file saved before the data root's size was recorded: the filesystem that holds it.
    ("STO-1110", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/var/lib/docker", "separate_mount": True},
                                       "filesystems": [{"mountpoint": "/", "size_gib": 50.0},
                                                       {"mountpoint": "/var/lib/docker", "size_gib": 240.0},
                                                       {"mountpoint": "/var/lib/dockerish", "size_gib": 9.0}]}},
     119, "pass", 240.0),
    ("STO-1110", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/var/lib/docker", "separate_mount": False},
                                       "root": {"size_gib": 100.0}}}, 119, "fail", 100.0),
    ("STO-1110", {**gpu(), "storage": {"docker_root": {"exists": False}, "root": {"size_gib": 500.0}}}, 119, "pass", 500.0),
    ("STO-1120", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/d", "free_gib": 10.0,
                                                       "size_gib": 238.5}}}, 238, "pass", 238.5),
    ("STO-1120", {"storage": {"docker_root": {"exists": False}, "root": {"size_gib": 200.0, "free_gib": 190.0}}},
     238, "fail", 200.0),
    ("STO-1110", {**gpu(), "storage": {"docker_root": {"exists": True, "path": "/d", "size_gib": Unknown("statvfs /d: denied")}}},
     119, "unknown", None),
    # Isolation, Docker, SSH and packages.
    ("ISO-1020", {"isolation": {"docker_group_members": ["alex"], "human_accounts": [{"name": "alex"}]}}, None, "fail", 1),
    ("ISO-1020", {"isolation": {"docker_group_members": [], "human_accounts": [{"name": "alex"}]}}, None, "pass", 0),
    ("ISO-1030", {"isolation": {"apparmor_enabled": False}}, None, "fail", "disabled"),
    ("DOC-1010", {"docker": {"reachable": True, "runtimes": ["runc", "nvidia"]}}, None, "pass", "runc, nvidia"),
    ("DOC-1010", {"docker": {"reachable": False, "unreachable_reason": "absent"}}, None, "fail", "Docker not installed"),
    ("DOC-1010", {"docker": {"reachable": False, "unreachable_reason": "permission_denied"}}, None, "unknown", None),
    ("DOC-1030", {"docker": {"reachable": True, "live_restore": False}}, None, "fail", "off"),
    ("DOC-1040", {"docker": {"reachable": True, "icc": False}}, None, "pass", "off"),
    # Docker absent: its settings are judged once it is installed (one cause, not a RISK per setting).
    ("DOC-1050", {"docker": {"reachable": False, "unreachable_reason": "absent", "daemon_json": Unknown("no file")}}, None, "unknown", None),
    ("DOC-1060", {"docker": {"reachable": True, "userns_remap": "", "rootless": True}}, None, "pass", "on"),
    ("SSH-1030", {"ssh": {"installed": True, "settings": {"permitemptypasswords": "yes"}}}, None, "fail", "yes"),
    ("SSH-1040", {"ssh": {"installed": True, "settings": {"kbdinteractiveauthentication": "no"}}}, None, "pass", "no"),
    ("PKG-1010", {"packages": {"unattended_upgrades": {"installed": True, "enabled": False}}}, None, "fail", "installed, not enabled"),
    ("PKG-1020", {"packages": {"nvidia_packages": [], "nvidia_held": []}}, None, "skipped", None),
    ("PKG-1020", {"packages": {"nvidia_packages": ["nvidia-driver-550"], "nvidia_held": []}}, None, "fail", "1 not held"),
    ("OWN-1020", {"isolation": {"credentials": [{"kind": "aws", "user": "a"}]}, "storage": {"home": {"encrypted": False}}}, None, "fail", "unencrypted"),
    ("OWN-1020", {"isolation": {"credentials": []}}, None, "pass", "no personal data"),
    ("OWN-1030", {"storage": {"swap": [{"device": "/swap.img", "encrypted": False}]}}, None, "fail", "unencrypted"),
    ("OWN-1030", {"storage": {"swap": []}}, None, "pass", "no swap"),
    ("OWN-1040", {"network": {"listening": [{"proto": "udp", "port": 5353, "exposure": "all"}]}, "ssh": {"installed": False}}, 0, "fail", 1),
    # Running containers' host-level access (ISO-1050), from the API's inspect.
    ("ISO-1050", {"docker": {"reachable": True, "containers": [container(network_mode="host")]}}, None, "fail", 1),
    ("ISO-1050", {"docker": {"reachable": True, "containers": [container(privileged=True), container(pid_mode="host"),
                                                                container(ipc_mode="host"), container(host_mounts=["/"]),
                                                                container(host_mounts=["/run/docker.sock"])]}}, None, "fail", 5),
    ("ISO-1050", {"docker": {"reachable": True, "containers": [container(), container(ipc_mode="shareable")]}}, None, "pass", 0),
    # --network container:X, X resolved by the collector
    ("ISO-1050", {"docker": {"reachable": True, "containers": [
        container(network_mode="container:" + "a" * 64, host_network=True),
        container(network_mode="container:" + "b" * 64, host_network=False)]}}, None, "fail", 1),
    ("ISO-1050", {"docker": {"reachable": True, "containers": [
        container(network_mode="container:" + "a" * 64, host_network=Unknown("could not be inspected"))]}},
     None, "unknown", 1),
    # facts saved before host_network was collected: a joined network cannot be told
    ("ISO-1050", {"docker": {"reachable": True, "containers": [
        {k: v for k, v in container(network_mode="container:" + "a" * 64).items() if k != "host_network"}]}},
     None, "unknown", 1),
    ("ISO-1050", {"docker": {"reachable": True, "containers": [
        {k: v for k, v in container(network_mode="host").items() if k != "host_network"}]}}, None, "fail", 1),
    ("ISO-1050", {"docker": {"reachable": False, "unreachable_reason": "absent"}}, None, "pass", 0),
    ("ISO-1050", {"docker": {"reachable": False, "unreachable_reason": "permission_denied"}}, None, "unknown", None),
    ("ISO-1050", {"docker": {"reachable": True, "containers": Unknown("GET /containers/json failed")}}, None, "unknown", None),
    # facts saved before docker.containers was collected
    ("ISO-1050", {"docker": {"reachable": True, "published_ports": []}}, None, "unknown", None),
    # route_localnet on container bridges (ISO-1060); the firewall walk is in test_container_egress
    ("ISO-1060", {"network": {"route_localnet": {"docker0": 0, "br-0123456789ab": 0}, "route_localnet_all": 0}},
     None, "pass", 0),
    ("ISO-1060", {"network": {"route_localnet": {}}}, None, "pass", 0),
    ("ISO-1060", {"network": {"route_localnet": {"docker0": 1}, "route_localnet_all": 0,
                              "firewall": Unknown("needs root")}}, None, "unknown", None),
    # all=1 routes every bridge's loopback traffic (the kernel ORs it with the bridge's value)
    ("ISO-1060", {"network": {"route_localnet": {"docker0": 0}, "route_localnet_all": 1,
                              "firewall": Unknown("needs root")}}, None, "unknown", None),
    # a bridge at 0 with all unknown: it may route, and no firewall was read
    ("ISO-1060", {"network": {"route_localnet": {"docker0": 0}}}, None, "unknown", None),
    ("ISO-1060", {"network": {"route_localnet": Unknown("/proc/sys/net/ipv4/conf/docker0/route_localnet could not be read")}},
     None, "unknown", None),
    # facts saved before route_localnet was collected
    ("ISO-1060", {"network": {"container_egress": {"bridges": ["docker0"]}}}, None, "unknown", None),
]


@pytest.mark.parametrize(("check_id", "facts", "threshold", "status", "measured"), CASES)
def test_check_outcome(check_id: str, facts: dict[str, Any], threshold: Any, status: str, measured: Any) -> None:
    outcome = run_check(REGISTRY[check_id], facts, threshold)
    assert (outcome.status, outcome.measured) == (status, measured), outcome.detail


@pytest.mark.parametrize(("name", "chassis", "status", "detail"), [
    ("NVIDIA GeForce RTX 3080 Ti Laptop GPU", ("desktop", 3), "fail", "name contains 'Laptop'"),
    ("NVIDIA GeForce GTX 1060 with Max-Q Design", ("desktop", 3), "fail", "name contains 'Max-Q'"),
    # pre-Ampere mobile parts carry no marker: the chassis tells
    ("NVIDIA GeForce RTX 2070", ("laptop", 10), "fail", "DMI chassis type 10 (laptop)"),
    ("NVIDIA GeForce RTX 4090", ("desktop", 3), "pass", ""),
    ("NVIDIA GeForce RTX 2070", (Unknown("no DMI"), Unknown("no DMI")), "unknown",
     "GPU name has no laptop marker, but the chassis type is unknown (no DMI)"),
])
def test_laptop_gpu_is_judged_from_the_name_and_the_chassis(
        name: str, chassis: tuple[Any, Any], status: str, detail: str) -> None:
    facts = gpu(name=name)
    facts["power"] = {"chassis_type": chassis[0], "chassis_type_code": chassis[1]}
    outcome = run_check(REGISTRY["GPU-1060"], facts, None)
    assert outcome.status == status
    assert detail in outcome.detail


def test_every_check_has_metadata_a_person_can_act_on() -> None:
    for check_id, meta in REGISTRY.items():
        assert meta.title and meta.why and meta.fix, check_id
        assert meta.op in (">=", ">", "<=", "<", "==", "!=", "in"), check_id


@pytest.mark.parametrize(("check_id", "measured", "status"), [
    ("SYS-1030", 2.0, "fail"),  # declares ">="
    ("GPU-1150", 2.0, "pass"),  # declares "<="
    ("GPU-1070", 4.0, "fail"),  # declares ">": equal is not enough
])
def test_a_comparison_is_judged_by_the_operator_its_check_declares(check_id: str, measured: float, status: str) -> None:
    meta = REGISTRY[check_id]
    outcome = meta.outcome(compare(measured, 4.0, "why"))
    assert (outcome.status, outcome.measured, outcome.detail) == (status, measured, "why")


def test_no_check_passes_on_empty_facts_except_absence_checks() -> None:
    """With nothing known, a check may only pass where absence itself is the answer."""
    thresholds = {"number": 1, "string": "1", "list": ["x"], "bool": True, "none": None}
    passing = sorted(
        cid for cid, meta in REGISTRY.items() if run_check(meta, {}, thresholds[meta.threshold_kind]).status == "pass"
    )
    assert passing == []


def test_ssh_finding_names_the_file_that_sets_the_value_and_socket_activation() -> None:
    """cloud-init's drop-in sets PasswordAuthentication yes: the finding points at that file;
    under ssh.socket a failing finding says that a change needs a restart, not a reload."""
    cloud = "/etc/ssh/sshd_config.d/50-cloud-init.conf"
    ssh = {"installed": True, "source": "sshd -T", "socket_activated": True,
           "settings": {"passwordauthentication": "yes", "permitrootlogin": "no"},
           "origins": {"passwordauthentication": cloud, "permitrootlogin": "/etc/ssh/sshd_config.d/01-hostcheck.conf"}}
    failing = run_check(REGISTRY["SSH-1010"], {"ssh": ssh}, None)
    assert (failing.status, failing.measured) == ("fail", "yes")
    assert f"set in {cloud}" in failing.detail and "ssh.socket" in failing.detail, failing.detail
    passing = run_check(REGISTRY["SSH-1020"], {"ssh": ssh}, None)
    assert passing.status == "pass" and "ssh.socket" not in passing.detail, passing.detail
    unread = run_check(REGISTRY["SSH-1010"], {"ssh": {**ssh, "origins": Unknown("permission denied"),
                                                      "socket_activated": False}}, None)
    assert unread.detail == "effective value from sshd -T", unread.detail


CLOUD_FILE = "/etc/sudoers.d/90-cloud-init-users"
CLOUD = f"{CLOUD_FILE}:3"
MAIN_SUDOERS = "root ALL=(ALL:ALL) ALL\n%sudo ALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n"
# sudo's PATH lacks ~/.local/bin, where the README installs hostcheck: the hint names the binary.
ROOT_ONLY = 'sudo rules are readable only by root; run `sudo "$(command -v hostcheck)" audit`'


def sudoers(dropin: str | None = None, listing: Unknown | None = None, main: str | Unknown = MAIN_SUDOERS) -> Any:
    """What the accounts collector records: /etc/sudoers and, when given, cloud-init's drop-in."""
    files: dict[str, str | Unknown] = {"/etc/sudoers": main}
    if dropin is not None:
        files[CLOUD_FILE] = dropin
    names = [CLOUD_FILE.rsplit("/", 1)[1]] if dropin is not None else []
    return includes.record(files.get, lambda d: names if listing is None else listing)


def cloud(name: str, *groups: tuple[str, int]) -> dict[str, Any]:
    return {"name": name, "uid": 1000, "groups": sorted([name, *(g for g, _ in groups)]),
            "gids": sorted([1000, *(gid for _, gid in groups)])}


@pytest.mark.parametrize(("accounts", "recorded", "status", "measured"), [
    ([cloud("ubuntu")], sudoers("# Created by cloud-init\n\nubuntu ALL=(ALL) NOPASSWD:ALL\n"), "fail",
     f"ubuntu: NOPASSWD ({CLOUD})"),
    ([cloud("ubuntu", ("sudo", 27))], sudoers(), "pass", "none for ubuntu"),
    ([cloud("admin")], sudoers("\n\nadmin ALL=(root) NOPASSWD: /usr/bin/systemctl restart nginx\n"), "pass",
     "none for admin"),
    ([cloud("debian")], sudoers(listing=Unknown("permission denied listing /etc/sudoers.d (needs root)")),
     "unknown", None),
    ([], None, "pass", "no default cloud account"),
    (Unknown("permission denied reading /etc/passwd"), Unknown("permission denied reading /etc/passwd"),
     "unknown", None),
])
def test_cloud_account_nopasswd_sudo(accounts: Any, recorded: Any, status: str, measured: Any) -> None:
    outcome = run_check(REGISTRY["ISO-1070"], {"isolation": {"cloud_accounts": accounts, "sudoers": recorded}}, None)
    assert (outcome.status, outcome.measured) == (status, measured), outcome.detail


def test_cloud_account_sudo_unread_says_why_as_it_always_has() -> None:
    """/etc/sudoers is root-only: the audit says so in the words it gave when the collector
    judged the accounts itself; a record that a format-2 file never held is named as such."""
    denied = sudoers(main=Unknown("permission denied reading /etc/sudoers (needs root)"))
    outcome = run_check(REGISTRY["ISO-1070"], {"isolation": {"cloud_accounts": [cloud("ubuntu")], "sudoers": denied}},
                        None)
    assert outcome.status == "unknown"
    assert outcome.detail == f"isolation.cloud_accounts: permission denied reading /etc/sudoers (needs root): {ROOT_ONLY}"
    old = run_check(REGISTRY["ISO-1070"], {"isolation": {"cloud_accounts": [cloud("ubuntu")],
                                                         "sudoers": Unknown("not recorded in format 2")}}, None)
    assert (old.status, old.detail) == ("unknown", "isolation.sudoers: not recorded in format 2")
    blind = {**cloud("ubuntu"), "groups": Unknown("not recorded in format 2")}
    groups = run_check(REGISTRY["ISO-1070"], {"isolation": {"cloud_accounts": [blind], "sudoers": sudoers()}}, None)
    assert groups.status == "unknown" and "ubuntu's groups: not recorded" in groups.detail, groups.detail



def test_saved_facts_are_rejudged_with_todays_sudo_rules_for_cloud_accounts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The accounts collector keeps the sudoers it read, not a verdict: a saved facts file is
    judged by the sudo rules of the hostcheck that reads it. Here a newer hostcheck counts an
    allowlist that holds a root shell (vim) as any command as root."""
    data = copy.deepcopy(load_snapshot(SNAPSHOTS / "dedicated-4090.json"))
    data["isolation"]["cloud_accounts"] = [cloud("ubuntu")]
    data["isolation"]["sudoers"] = sudoers("# Created by cloud-init\n\nubuntu ALL=(root) NOPASSWD: /usr/bin/vim\n")
    saved = tmp_path / "facts.json"
    saved.write_text(json.dumps(to_jsonable(data)), encoding="utf-8")
    assert '"facts_format": 3' in saved.read_text() and "sudo_scope" not in saved.read_text()
    before = run_check(REGISTRY["ISO-1070"], load_snapshot(saved), None)
    assert (before.status, before.measured) == ("pass", "none for ubuntu"), before.detail
    today = matching.account_view

    def newer(*args: Any, **kwargs: Any) -> dict[str, Any]:
        view = today(*args, **kwargs)
        return {**view, "scope": "unrestricted"} if view["root_giving"] else view

    monkeypatch.setattr(matching, "account_view", newer)
    after = run_check(REGISTRY["ISO-1070"], load_snapshot(saved), None)
    assert (after.status, after.measured) == ("fail", f"ubuntu: NOPASSWD ({CLOUD})"), after.detail
