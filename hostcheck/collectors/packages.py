"""Package state from dpkg's database and APT's config: automatic updates, NVIDIA packages, the
NVIDIA driver's versions (loaded kernel module, user-space library, package) and a pending reboot."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from hostcheck.collectors._run import read_text
from hostcheck.facts import Unknown

SECTION = "packages"
TIMEOUT = 3.0

DPKG_STATUS = "/var/lib/dpkg/status"
APT_CONF_DIR = "/etc/apt/apt.conf.d"
APT_CONF_MAIN = "/etc/apt/apt.conf"
UNATTENDED_KEY = "apt::periodic::unattended-upgrade"
# apt reads only files named like this in apt.conf.d (no extension, or ".conf").
_APT_PART_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class DpkgPackage:
    name: str
    want: str  # install | hold | deinstall | purge | unknown
    state: str  # installed | config-files | half-installed | ...
    version: str = ""


def parse_dpkg_status(text: str) -> list[DpkgPackage]:
    """Packages in a dpkg status file (one paragraph per package and architecture)."""
    packages = []
    for paragraph in re.split(r"\n\s*\n", text):
        name = status = version = ""
        for line in paragraph.splitlines():
            if line.startswith("Package:"):
                name = line.partition(":")[2].strip()
            elif line.startswith("Status:"):
                status = line.partition(":")[2].strip()
            elif line.startswith("Version:"):
                version = line.partition(":")[2].strip()
        words = status.split()
        if name and len(words) == 3:
            packages.append(DpkgPackage(name, words[0], words[2], version))
    return packages


def installed_names(packages: list[DpkgPackage]) -> set[str]:
    return {p.name for p in packages if p.state == "installed"}


def is_nvidia_package(name: str) -> bool:
    return "nvidia" in name or name.startswith("cuda-drivers")


def nvidia_packages(packages: list[DpkgPackage]) -> tuple[list[str], list[str]]:
    """(installed NVIDIA packages, those on hold), sorted and without duplicates."""
    installed = {p.name for p in packages if p.state == "installed" and is_nvidia_package(p.name)}
    held = {p.name for p in packages if p.want == "hold" and p.name in installed}
    return sorted(installed), sorted(held)


def _strip_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            end = text.find('"', i + 1)
            end = n if end < 0 else end + 1
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i) or (ch == "#" and not text.startswith(("#clear", "#include"), i)):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_APT_TOKEN = re.compile(r'"[^"]*"|[{};]|#clear|#include|[^\s{};"]+')


def parse_apt_conf(text: str) -> dict[str, str]:
    """Flat, lower-case option names -> values for one apt.conf text (later wins).

    Handles both ``APT::Periodic::X "1";`` and nested ``APT { Periodic { X "1"; }; };``.
    """
    values: dict[str, str] = {}
    scope: list[str] = []
    pending: list[str] = []
    for tok in _APT_TOKEN.findall(_strip_comments(text)):
        if tok == "{":
            if pending:
                scope.append(pending[0].strip('"'))
            pending = []
        elif tok == "}":
            if scope:
                scope.pop()
            pending = []
        elif tok == ";":
            if len(pending) >= 2 and pending[0] not in ("#clear", "#include"):
                key = "::".join(scope + [pending[0].strip('"')]).lower()
                values[key] = pending[1].strip('"')
            pending = []
        else:
            pending.append(tok)
    return values


def apt_conf_files(conf_dir: str = APT_CONF_DIR, main: str = APT_CONF_MAIN) -> list[str]:
    """The files apt reads, in its order: the parts directory sorted, then apt.conf."""
    try:
        names = sorted(os.listdir(conf_dir))
    except OSError:
        names = []
    files = [
        os.path.join(conf_dir, n)
        for n in names
        if _APT_PART_NAME.match(n) and ("." not in n or n.endswith(".conf"))
    ]
    if os.path.isfile(main):
        files.append(main)
    return [f for f in files if os.path.isfile(f)]


def periodic_enabled(value: str | None) -> bool:
    """APT::Periodic values are intervals in days; 0 or absent means never."""
    if value is None:
        return False
    if value.strip().lower() == "always":
        return True
    try:
        return int(value.strip()) > 0
    except ValueError:
        return False


def unattended_enabled(files: list[str]) -> bool | Unknown:
    value: str | None = None
    set_at = -1
    unreadable: list[tuple[int, str]] = []
    for index, path in enumerate(files):
        text = read_text(path)
        if isinstance(text, Unknown):
            unreadable.append((index, path))
            continue
        found = parse_apt_conf(text).get(UNATTENDED_KEY)
        if found is not None:
            value, set_at = found, index
    # A file apt reads after the last one we saw setting the key could override it.
    hidden = [path for index, path in unreadable if index > set_at]
    if hidden:
        return Unknown(f"cannot read {', '.join(hidden)}")
    return periodic_enabled(value)


NVIDIA_PROC_VERSION = "/proc/driver/nvidia/version"
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
DRIVER_VERSION = r"\d{2,4}\.\d{1,4}(?:\.\d{1,4})?"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ..." and, for the open modules,
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ...".
_MODULE_LINE = re.compile(rf"^NVRM version: NVIDIA UNIX .*?Kernel Module(?: for \S+)?\s+({DRIVER_VERSION})\s", re.M)
_LIBRARY_NAME = re.compile(rf"^libnvidia-ml\.so\.({DRIVER_VERSION})$")
# The package that ships libnvidia-ml: Debian's libnvidia-ml1, Ubuntu's libnvidia-compute-NNN[-server],
# NVIDIA's CUDA repository's libnvidia-compute-NNN too.
_LIBRARY_PACKAGE = re.compile(r"^(libnvidia-ml1|libnvidia-compute-\d+(-server)?)$")
REBOOT_REQUIRED = "/var/run/reboot-required"
MAX_REBOOT_PACKAGES = 50
_PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9+.\-]{0,99}$")


def parse_module_version(text: str) -> str | Unknown:
    """The loaded NVIDIA kernel module's version from /proc/driver/nvidia/version."""
    match = _MODULE_LINE.search(text)
    return match.group(1) if match else Unknown(f"{NVIDIA_PROC_VERSION} names no kernel module version")


def module_version(path: str = NVIDIA_PROC_VERSION) -> str | Unknown:
    text = read_text(path, limit=4096)
    if isinstance(text, Unknown):
        return Unknown(f"no NVIDIA kernel module loaded ({text.reason})") if not os.path.exists(path) else text
    return parse_module_version(text)


def library_version(dirs: tuple[str, ...] = LIBRARY_DIRS) -> str | Unknown:
    """The version of the NVML library programs load: where libnvidia-ml.so.1 points, else the
    only libnvidia-ml.so.VERSION there is."""
    found: set[str] = set()
    for folder in dirs:
        link = os.path.join(folder, "libnvidia-ml.so.1")
        if os.path.lexists(link):
            match = _LIBRARY_NAME.match(os.path.basename(os.path.realpath(link)))
            if match:
                return match.group(1)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found.update(m.group(1) for m in map(_LIBRARY_NAME.match, names) if m)
    if len(found) == 1:
        return found.pop()
    if found:
        return Unknown(f"several NVML libraries ({', '.join(sorted(found))}) and no libnvidia-ml.so.1 naming one")
    return Unknown("no NVIDIA user-space library (libnvidia-ml.so) installed")


def upstream_version(version: str) -> str:
    """'1:550.107.02-0ubuntu0.24.04.1' -> '550.107.02' (no epoch, no Debian revision)."""
    without_epoch = version.split(":", 1)[-1]
    return without_epoch.rsplit("-", 1)[0]


def package_version(packages: list[DpkgPackage]) -> str | Unknown:
    versions = {upstream_version(p.version) for p in packages
                if p.state == "installed" and _LIBRARY_PACKAGE.match(p.name) and p.version}
    if len(versions) == 1:
        return versions.pop()
    if versions:
        return Unknown(f"several NVIDIA library packages installed ({', '.join(sorted(versions))})")
    return Unknown("no NVIDIA library package installed (libnvidia-ml1 or libnvidia-compute-*)")


def reboot_required(flag: str = REBOOT_REQUIRED) -> dict[str, Any]:
    """Whether a package asked for a reboot, and which ones (``reboot-required.pkgs``)."""
    if not os.path.lexists(flag):
        return {"pending": False, "packages": []}
    listed = read_text(flag + ".pkgs", limit=16 << 10)
    names = [] if isinstance(listed, Unknown) else listed.split()
    return {"pending": True,
            "packages": sorted({n for n in names if _PACKAGE_NAME.match(n)})[:MAX_REBOOT_PACKAGES]}


def collect(ctx: Any) -> dict[str, Any]:
    text = read_text(DPKG_STATUS, limit=64 << 20)
    if isinstance(text, Unknown):
        why = Unknown(f"not a Debian-based system or dpkg database unreadable: {text.reason}")
        return {"unattended_upgrades": why, "nvidia_packages": why, "nvidia_held": why,
                "nvidia_versions": {"kernel_module": module_version(), "library": library_version(), "package": why},
                "reboot_required": why}
    packages = parse_dpkg_status(text)
    installed = installed_names(packages)
    nvidia, held = nvidia_packages(packages)
    return {
        "unattended_upgrades": {
            "installed": "unattended-upgrades" in installed,
            "enabled": unattended_enabled(apt_conf_files()),
        },
        "nvidia_packages": nvidia,
        "nvidia_held": held,
        "nvidia_versions": {"kernel_module": module_version(), "library": library_version(),
                            "package": package_version(packages)},
        "reboot_required": reboot_required(),
    }
