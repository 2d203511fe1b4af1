"""The NVIDIA driver's parts at one version (PKG-1040) and a pending reboot (PKG-1050).

No GPU here: the kernel module's ``/proc/driver/nvidia/version`` texts are those real hosts
printed in public bug reports (each cited), written to real files; the library is a real
``libnvidia-ml.so.1`` symlink in a directory of the test's own; the package comes from a dpkg
status paragraph in dpkg's own format.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors import packages
from hostcheck.facts import Unknown
from hostcheck.judge import run_check

# Real /proc/driver/nvidia/version texts and what the same host's libraries or packages were.
REAL = {
    # illinois-scicomp/machine-shop-maintenance issue 70 (Debian 12, 2023-02-24): dpkg had
    # nvidia-smi 525.85.12-1 while the module stayed at 520.56.06.
    "debian-520": ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022\n"
                   "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n", "520.56.06", "525.85.12-1"),
    # zzzhouuu/truenas-nvidia-drivers issue 19 (2026-09-05): "NVML library version: 580.178".
    "truenas-580": ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun 23 08:38:17 UTC 2026\n"
                    "GCC version:  gcc version 14.2.0 (Ubuntu 14.2.0-4ubuntu2~24.04.1)\n", "580.173.02", None),
    # oddmario/NVIDIA-Ubuntu-Driver-Guide issue 4 (Ubuntu 24.04, 2024-09-05): nvidia-driver-550
    # 550.107.02-0ubuntu0.24.04.1 installed under this module.
    "ubuntu-550": ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n",
                   "550.90.07", "550.107.02-0ubuntu0.24.04.1"),
    # The open modules' first line, as quoted in a third-party parser's tests (no bug report at hand).
    "open-575": ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  "
                 "(dvs-builder@U16)  Tue May 20 2025\n", "575.57.08", None),
}


@pytest.mark.parametrize("case", REAL)
def test_the_loaded_modules_version_is_read_from_real_texts(case: str, tmp_path: Path) -> None:
    text, version, _ = REAL[case]
    proc = tmp_path / "version"
    proc.write_text(text)
    assert packages.module_version(str(proc)) == version


@pytest.mark.parametrize("text", ["", "NVRM version: NVIDIA UNIX x86_64 Kernel Module\n", "GCC version: 12\n",
                                  "NVRM version: NVIDIA UNIX x86_64 Kernel Module  ; rm -rf /  x\n", "\x00" * 5000])
def test_a_version_file_that_names_no_version_is_unknown(text: str, tmp_path: Path) -> None:
    proc = tmp_path / "version"
    proc.write_text(text)
    assert isinstance(packages.module_version(str(proc)), Unknown)


def test_no_module_loaded_says_so(tmp_path: Path) -> None:
    result = packages.module_version(str(tmp_path / "absent"))
    assert isinstance(result, Unknown) and "no NVIDIA kernel module loaded" in result.reason


def test_the_library_is_the_one_libnvidia_ml_so_1_points_to(tmp_path: Path) -> None:
    for version in ("570.124.04", "580.95.05"):
        (tmp_path / f"libnvidia-ml.so.{version}").write_bytes(b"\x7fELF")
    assert isinstance(packages.library_version((str(tmp_path),)), Unknown)  # two, and nothing says which
    os.symlink("libnvidia-ml.so.580.95.05", tmp_path / "libnvidia-ml.so.1")
    assert packages.library_version((str(tmp_path),)) == "580.95.05"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no NVIDIA user-space library" in packages.library_version((str(empty),)).reason


def status(name: str, version: str, state: str = "install ok installed") -> str:
    return f"Package: {name}\nStatus: {state}\nArchitecture: amd64\nVersion: {version}\n"


@pytest.mark.parametrize(("paragraphs", "expected"), [
    ([status("libnvidia-compute-550", "550.107.02-0ubuntu0.24.04.1")], "550.107.02"),
    ([status("libnvidia-ml1", "525.85.12-1")], "525.85.12"),
    ([status("libnvidia-compute-580-server", "1:580.95.05-0ubuntu1")], "580.95.05"),
    ([status("libnvidia-compute-550", "550.90.07-0ubuntu1", "deinstall ok config-files")], None),
    ([status("nvidia-utils-550", "550.90.07-0ubuntu1")], None),
])
def test_the_package_version_is_its_upstream_part(paragraphs: list[str], expected: str | None) -> None:
    found = packages.package_version(packages.parse_dpkg_status("\n".join(paragraphs)))
    assert found == expected if expected else isinstance(found, Unknown)


def verdict(check_id: str, facts: dict[str, Any]) -> tuple[str, Any, str]:
    outcome = run_check(load_registry()[check_id], facts, None)
    return outcome.status.value, outcome.measured, outcome.detail


def versions(module: Any, library: Any, package: Any, nvml_reason: Any = None) -> dict[str, Any]:
    return {"packages": {"nvidia_versions": {"kernel_module": module, "library": library, "package": package}},
            "gpu": {"nvml": {"available": nvml_reason is None, "reason": nvml_reason}}}


@pytest.mark.parametrize("case", ["debian-520", "ubuntu-550"])
def test_a_real_upgrade_under_a_loaded_module_fails(case: str, tmp_path: Path) -> None:
    text, _, package = REAL[case]
    proc = tmp_path / "version"
    proc.write_text(text)
    module = packages.module_version(str(proc))
    upstream = packages.upstream_version(package)
    status_, measured, _ = verdict("PKG-1040", versions(module, Unknown("NVML refused to start"), upstream))
    assert status_ == "fail" and module in measured and upstream in measured


def test_nvmls_own_mismatch_error_fails_even_without_versions() -> None:
    reason = "NVML init failed: Driver/library version mismatch"
    facts = versions(Unknown("no NVIDIA kernel module loaded"), Unknown("x"), Unknown("y"), nvml_reason=reason)
    assert verdict("PKG-1040", facts)[0] == "fail"


def test_one_version_passes_and_too_little_is_unknown() -> None:
    assert verdict("PKG-1040", versions("580.95.05", "580.95.05", "580.95.05"))[0] == "pass"
    assert verdict("PKG-1040", versions("580.95.05", "580.95.05", Unknown("a .run install")))[0] == "pass"
    assert verdict("PKG-1040", versions("580.95.05", Unknown("none"), Unknown("none")))[0] == "unknown"
    assert verdict("PKG-1040", versions(Unknown("no NVIDIA kernel module loaded"), "580.95.05", "580.95.05"))[0] \
        == "unknown"
    none = Unknown("no NVIDIA kernel module loaded")
    assert verdict("PKG-1040", versions(none, Unknown("no library"), Unknown("no package")))[0] == "skipped"


def test_a_pending_reboot_is_read_from_the_flag_files_and_fails(tmp_path: Path) -> None:
    flag = tmp_path / "reboot-required"
    assert packages.reboot_required(str(flag)) == {"pending": False, "packages": []}
    flag.write_text("*** System restart required ***\n")
    (tmp_path / "reboot-required.pkgs").write_text("linux-image-6.8.0-45-generic\nnvidia-dkms-550\n\x1b[31mx\n")
    state = packages.reboot_required(str(flag))
    assert state == {"pending": True, "packages": ["linux-image-6.8.0-45-generic", "nvidia-dkms-550"]}
    status_, measured, detail = verdict("PKG-1050", {"packages": {"reboot_required": state}})
    assert status_ == "fail" and detail.startswith("asked by nvidia-dkms-550")
    assert verdict("PKG-1050", {"packages": {"reboot_required": {"pending": False, "packages": []}}})[0] == "pass"
