"""Build and cache the Debian root filesystem (12 by default, or 13) every lab host (nspawn and VM) starts from.

One debootstrap serves both lanes: the default suite's package list has the cloud kernel and
initramfs, so the VM image is made from the very same tree the containers boot (a container
ignores /boot). The result is cached twice under the cache dir:

- ``rootfs-<key>.tar[.zst]``: the portable artifact (CI caches this file),
- ``rootfs-<key>/``: the extracted tree, used read-only as the overlay lower layer.

``<key>`` hashes the suite, mirror, package list and :data:`RECIPE_VERSION`, so a changed
package list or customisation never reuses a stale tree.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.lab import timing
from tests.lab.errors import LabError
from tests.lab.util import log, run

SUITE = "bookworm"
"""The default lab distribution (Debian 12)."""
SUITES: dict[str, str] = {"bookworm": "12", "trixie": "13"}
"""Debian releases a lab host can run (suite -> version). Both are verified by the profile
lifecycle (tests/lanes/profile/test_profile_lifecycle.py)."""
PYTHON: dict[str, str] = {"bookworm": "3.11", "trixie": "3.13"}
"""The suite's python3 (hostcheck's wheels are built for it, tests/lab/hostcheck_install.py)."""
CGROUP2_ONLY: frozenset[str] = frozenset({"trixie"})
"""Suites whose systemd (256+) refuses to boot on the hybrid cgroup layout nspawn would give
it on a hybrid machine: their containers get a cgroup2-only view (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY)."""
MIRROR = "http://deb.debian.org/debian"

PACKAGES: tuple[str, ...] = (
    # what lab-hosts.md measured as the minimum for a real systemd server reachable by SSH
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt",
    "iproute2", "sudo", "kmod", "nftables", "ca-certificates",
    # pre-baked because the roles and the audit need them (apt inside a host costs ~5 s each)
    "libpam-systemd",  # logind sessions, as on a standard server (hostcheck reads them)
    "udev",  # the VM lane needs /dev/disk/by-label and en* names; inert in containers
    "procps",  # sysctl, ps: ansible.posix.sysctl and hostcheck need them
    "acl",  # Ansible's become_user to an unprivileged user needs setfacl
    "tzdata", "systemd-timesyncd", "unattended-upgrades", "apt-utils", "xfsprogs",
    "python3-venv",  # installing hostcheck into a venv inside a lab host
    "iputils-ping", "netcat-openbsd", "curl", "less",
    "smartmontools",  # the audit's drive health (smartctl --json), read on the VM lane's emulated NVMe drive
)
"""Debian packages in every lab rootfs. docker.io is deliberately absent (large; roles install it)."""
VM_PACKAGES: tuple[str, ...] = ("linux-image-cloud-amd64", "initramfs-tools")
"""The VM lane's kernel and initrd (they end up in /boot; lab-hosts.md: ~4 s to turn into an
image), only in the default suite's rootfs, the one the VM image is made from: elsewhere they
would cost a kernel unpack and an initramfs build for nothing."""

UBUNTU_DEFAULT_PACKAGES = ("ufw", "systemd-resolved", "needrestart")
"""What an Ubuntu Server image has that a Debian one lacks, installed by the profile lifecycle's
Ubuntu-default host (tests/lanes/profile/test_profile_lifecycle.py) from the rootfs's apt archive."""
WATCH_PACKAGES = ("prometheus-node-exporter",)
"""hostcheck_watch_node_exporter_package's default, installed by the fleet lane (tests/lanes/fleet)."""
ROLE_PACKAGES: dict[str, tuple[str, ...]] = {"bookworm": ("docker.io", *WATCH_PACKAGES, *UBUNTU_DEFAULT_PACKAGES),
                                             "trixie": ("docker.io", "docker-cli", *UBUNTU_DEFAULT_PACKAGES)}
"""Per suite: what the roles install that the rootfs lacks (docker_host_packages' default, and on
Debian 12 WATCH_PACKAGES), and UBUNTU_DEFAULT_PACKAGES. Downloaded (not installed) into the
rootfs's apt archive when it is built, so an ``apt`` install finds them in the cache instead of
the mirror; the install itself, and what the rollback manifest records, stay real. Nothing of
them runs at build time: no maintainer script, no service (a unit installed into the tree
would start on every lab host's boot and listen in every audit)."""

RECIPE_VERSION = 2
"""Bump whenever :func:`_customize` changes, so cached trees are rebuilt."""

DEFAULT_CACHE = Path("/var/cache/hostcheck-lab")
ADMIN_USER = "admin"
ADMIN_UID = 1000
TAR_FLAGS = ["--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls"]


def cache_dir() -> Path:
    """Where built artifacts live (``HOSTCHECK_LAB_CACHE`` overrides the default)."""
    path = Path(os.environ.get("HOSTCHECK_LAB_CACHE") or DEFAULT_CACHE)
    path.mkdir(parents=True, exist_ok=True)
    return path


def suite_packages(suite: str = SUITE) -> tuple[str, ...]:
    """What debootstrap installs for ``suite``: :data:`PACKAGES`, and the VM's kernel in the VM's suite."""
    return PACKAGES + VM_PACKAGES if suite == SUITE else PACKAGES


def rootfs_key(packages: tuple[str, ...], suite: str = SUITE) -> str:
    """Cache key: anything that changes the tree's content changes the key."""
    recipe = {"suite": suite, "mirror": MIRROR, "packages": sorted(packages), "recipe": RECIPE_VERSION,
              "prefetched": sorted(ROLE_PACKAGES.get(suite, ()))}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Rootfs:
    """A built, extracted lab rootfs (treat :attr:`base` as read-only: overlays sit on it)."""

    key: str
    base: Path
    """Extracted tree; the lower layer of every lab host's overlay."""
    tarball: Path
    packages: tuple[str, ...]
    origin: str
    """How this call got it: "built" (debootstrap ran), "extracted" (from the tarball), "cached"."""
    seconds: float
    suite: str = SUITE

    @property
    def version(self) -> str:
        """Debian major version ("12", "13")."""
        return SUITES[self.suite]

    @property
    def python(self) -> str:
        return PYTHON[self.suite]

    @property
    def kernel(self) -> Path:
        return _one(self.base / "boot", "vmlinuz-*")

    @property
    def initrd(self) -> Path:
        return _one(self.base / "boot", "initrd.img-*")


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise LabError(f"expected exactly one {pattern} in {folder}, found {[p.name for p in found]}")
    return found[0]


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Serialise builds of one artifact across concurrent test sessions (other developers)."""
    path = cache_dir() / f"{name}.lock"
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compressor() -> tuple[str, list[str]]:
    # zstd makes the CI cache artifact ~2x smaller at no measurable cost; plain tar otherwise
    if shutil.which("zstd"):
        return ".tar.zst", ["--use-compress-program=zstd -T0 -3 -q"]
    return ".tar", []


def ensure_rootfs(packages: tuple[str, ...] | None = None, suite: str = SUITE) -> Rootfs:
    """Return the cached rootfs of Debian ``suite`` with ``packages`` (default: the suite's,
    :func:`suite_packages`), building or extracting it if needed (the result is recorded for
    the suite's timing report, tests/lab/timing.py)."""
    if suite not in SUITES:
        raise LabError(f"unknown lab suite {suite!r}: one of {sorted(SUITES)}")
    packages = suite_packages(suite) if packages is None else packages
    key = rootfs_key(packages, suite)
    cache = cache_dir()
    base = cache / f"rootfs-{key}"
    started = time.monotonic()
    with cache_lock(f"rootfs-{key}"):
        tarball = next((p for p in (cache / f"rootfs-{key}.tar.zst", cache / f"rootfs-{key}.tar") if p.exists()), None)
        if (base / ".complete").exists() and tarball is not None:
            rootfs = Rootfs(key, base, tarball, packages, "cached", time.monotonic() - started, suite)
            timing.record_cache(f"rootfs {suite}", "warm", rootfs.seconds, key)
            return rootfs
        if base.exists():
            shutil.rmtree(base)  # half-extracted by a killed session
        staging = cache / f"rootfs-{key}.partial"
        if staging.exists():
            _unmount_below(staging)  # an interrupted debootstrap leaves its /proc mounted there
            shutil.rmtree(staging)
        staging.mkdir()
        if tarball is not None:
            origin = "extracted"
            flags = ["--use-compress-program=zstd -d -q"] if tarball.suffix == ".zst" else []
            run(["tar", *TAR_FLAGS, *flags, "-xpf", str(tarball), "-C", str(staging)], timeout=300)
        else:
            origin = "built"
            step_started = time.monotonic()
            try:
                _debootstrap(staging, packages, suite)
            finally:
                _unmount_below(staging)
            _customize(staging, suite)
            debootstrap_s = time.monotonic() - step_started
            step_started = time.monotonic()
            _prefetch(staging, suite, ROLE_PACKAGES.get(suite, ()))
            log(f"rootfs {suite}: debootstrap {debootstrap_s:.1f}s, prefetch {time.monotonic() - step_started:.1f}s")
            suffix, flags = _compressor()
            tarball = cache / f"rootfs-{key}{suffix}"
            partial = tarball.with_name(tarball.name + ".partial")
            run(["tar", *TAR_FLAGS, *flags, "-cf", str(partial), "-C", str(staging), "."], timeout=300)
            partial.rename(tarball)
        (staging / ".complete").write_text(f"{key}\n")
        staging.rename(base)
    seconds = time.monotonic() - started
    log(f"rootfs {suite} {key}: {origin} in {seconds:.1f}s")
    timing.record_cache(f"rootfs {suite}", "cold" if origin == "built" else "extracted", seconds, key)
    return Rootfs(key, base, tarball, packages, origin, seconds, suite)


def _unmount_below(folder: Path) -> None:
    """Lazily unmount everything mounted at or below ``folder`` (deepest first)."""
    prefix = str(folder.resolve())
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    points = [line.split()[4].replace("\\040", " ") for line in lines]
    for point in sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)


def _debootstrap(target: Path, packages: tuple[str, ...], suite: str = SUITE) -> None:
    log(f"debootstrap {suite} into {target} ({len(packages)} packages, ~70 s)")
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", suite, str(target), MIRROR]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        debootstrap_log = target / "debootstrap" / "debootstrap.log"
        if debootstrap_log.exists():
            tail += "\n--- debootstrap.log ---\n" + "\n".join(debootstrap_log.read_text(errors="replace").splitlines()[-30:])
        raise LabError(f"debootstrap failed (rc {result.returncode}):\n{tail}")


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text(text)
    os.chmod(path, mode)


def _sources(suite: str) -> str:
    return (f"deb {MIRROR} {suite} main\n"
            f"deb {MIRROR} {suite}-updates main\n"
            f"deb {MIRROR}-security {suite}-security main\n")


def _prefetch(root: Path, suite: str, packages: tuple[str, ...]) -> None:
    """Download ``packages`` and what they need beyond the tree into ``root``'s apt archive,
    and leave the fresh package lists of all three suites in ``root``.

    apt runs on this machine against the tree's own dpkg status and keyring (``Dir::State::status``,
    ``signed-by``), so it resolves exactly what a host built from this tree will need, and
    nothing inside the tree is executed. A host's ``apt-get install`` then finds the .deb files
    in /var/cache/apt/archives and only downloads what a newer point release replaced.
    """
    if not packages:
        return
    keyring = root / "usr/share/keyrings/debian-archive-keyring.gpg"
    work = root.parent / f"{root.name}.apt"
    shutil.rmtree(work, ignore_errors=True)
    for sub in ("lists/partial", "archives/partial", "etc/sources.list.d", "etc/preferences.d", "etc/apt.conf.d"):
        (work / sub).mkdir(parents=True)
    sources = work / "etc/sources.list"
    sources.write_text("".join(line.replace("deb ", f"deb [signed-by={keyring}] ", 1) + "\n"
                               for line in _sources(suite).splitlines()))
    options = [
        "-o", f"Dir::Etc={work / 'etc'}", "-o", f"Dir::Etc::SourceList={sources}",
        "-o", f"Dir::Etc::SourceParts={work / 'etc/sources.list.d'}",
        "-o", f"Dir::Etc::Parts={work / 'etc/apt.conf.d'}", "-o", f"Dir::Etc::PreferencesParts={work / 'etc/preferences.d'}",
        "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::State::status={root / 'var/lib/dpkg/status'}",
        "-o", f"Dir::Cache={work / 'cache'}", "-o", f"Dir::Cache::Archives={work / 'archives'}",
        "-o", "APT::Architecture=amd64", "-o", "APT::Architectures::=amd64", "-o", "APT::Sandbox::User=root",
        "-o", "Acquire::Languages=none", "-o", "APT::Install-Recommends=false", "-q",
    ]
    try:
        run(["apt-get", *options, "update"], timeout=600)
        run(["apt-get", *options, "--download-only", "--yes", "install", *packages], timeout=900)
        archives = root / "var/cache/apt/archives"
        archives.mkdir(parents=True, exist_ok=True)
        for deb in (work / "archives").glob("*.deb"):
            shutil.move(str(deb), archives / deb.name)
        lists = root / "var/lib/apt/lists"
        for entry in (work / "lists").iterdir():
            if entry.is_file() and entry.name != "lock":
                shutil.copy2(entry, lists / entry.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _customize(root: Path, suite: str = SUITE) -> None:
    """Session-independent setup baked into the cache. Per-host data (keys, hostname,
    machine-id, password) is written when a host starts, never here.

    Only offline tools touch the tree (``useradd --root``, ``systemctl --root``): nothing
    executes inside it, so no package script can reach this machine.
    """
    # what debootstrap copied from this machine must not leak into the lab hosts
    _write(root, "etc/hostname", "lab\n")
    _write(root, "etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    # slirp4netns (nspawn lane) and qemu user networking (VM lane) both answer DNS here
    _write(root, "etc/resolv.conf", "nameserver 10.0.2.3\n")
    _write(root, "etc/apt/sources.list", _sources(suite))
    run(["useradd", "--root", str(root), "--create-home", "--shell", "/bin/bash",
         "--uid", str(ADMIN_UID), "--user-group", "--groups", "sudo", "--comment", "lab admin", ADMIN_USER])
    # NOPASSWD as on a cloud server: Ansible's become and testinfra's sudo cannot type one
    _write(root, f"etc/sudoers.d/90-lab-{ADMIN_USER}", f"{ADMIN_USER} ALL=(ALL) NOPASSWD:ALL\n", 0o440)
    # an empty machine-id would make systemd run first-boot presets on every container
    _write(root, "etc/machine-id", "0" * 31 + "1\n", 0o444)
    run(["systemctl", f"--root={root}", "enable", "ssh.service"])
