"""Package state from dpkg's database and APT's config: automatic updates, NVIDIA packages."""

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


def parse_dpkg_status(text: str) -> list[DpkgPackage]:
    """Packages in a dpkg status file (one paragraph per package and architecture)."""
    packages = []
    for paragraph in re.split(r"\n\s*\n", text):
        name = status = ""
        for line in paragraph.splitlines():
            if line.startswith("Package:"):
                name = line.partition(":")[2].strip()
            elif line.startswith("Status:"):
                status = line.partition(":")[2].strip()
        words = status.split()
        if name and len(words) == 3:
            packages.append(DpkgPackage(name, words[0], words[2]))
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


def collect(ctx: Any) -> dict[str, Any]:
    text = read_text(DPKG_STATUS, limit=64 << 20)
    if isinstance(text, Unknown):
        why = Unknown(f"not a Debian-based system or dpkg database unreadable: {text.reason}")
        return {"unattended_upgrades": why, "nvidia_packages": why, "nvidia_held": why}
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
    }
