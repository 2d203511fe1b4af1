"""Package checks (PKG-*): automatic security updates, their source, the held NVIDIA driver, its
parts at one version, a pending reboot."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import Outcome, check, failed, family, need, passed, skipped, state_of, unknown
from hostcheck.checks.readers import NVIDIA_VERSIONS as _VERSIONS
from hostcheck.checks.readers import REBOOT_REQUIRED as _REBOOT
from hostcheck.checks.readers import unattended_upgrades
from hostcheck.facts import Unknown, lookup

PKG = family("PKG", "Packages and updates", order=90)

_APT_SOURCES = "packages.apt_sources"


@check(
    "PKG-1010",
    title="Security updates installed automatically",
    op="==",
    threshold="none",
    why="A host running strangers' code must get kernel and container-runtime fixes promptly. "
    "(Vast's pages disagree: the security page keeps security-only updates on, the checklist "
    "turns them off; hostcheck follows the security page and holds the NVIDIA driver instead.)",
    fix="`apt install unattended-upgrades` and enable it (security origin only); hold NVIDIA packages.",
    fix_role="host_baseline: host_baseline_security_updates",
    shown="unattended-upgrades {}".format,
)
def security_updates(facts: dict[str, Any], _threshold: Any) -> Outcome:
    state = unattended_upgrades(facts)
    if not state.get("installed"):
        return failed("not installed")
    return passed("enabled") if state.get("enabled") else failed("installed, not enabled")


@check(
    "PKG-1020",
    title="NVIDIA driver packages held",
    op="==",
    threshold="none",
    why="Automatic upgrades that move NVIDIA libraries past the loaded kernel module cause "
    "'driver/library version mismatch' and take the GPU offline until a reboot.",
    fix="`sudo apt-mark hold` the installed nvidia/libnvidia packages; upgrade them deliberately.",
    fix_role="host_baseline: host_baseline_hold_nvidia",
)
def nvidia_held(facts: dict[str, Any], _threshold: Any) -> Outcome:
    installed = set(need(facts, "packages.nvidia_packages"))
    if not installed:
        return skipped("no NVIDIA packages installed")
    held = set(need(facts, "packages.nvidia_held"))
    loose = sorted(installed - held)
    return failed(f"{len(loose)} not held", ", ".join(loose[:5])) if loose else passed("all held")


@check(
    "PKG-1030",
    title="Automatic security updates have a security source",
    op="==",
    threshold="none",
    why="Security-only automatic upgrades install from the distribution's security origin; "
    "without that origin among the APT sources they run every day and never install a fix, "
    "while the host looks patched.",
    fix="Add the security suite to the APT sources (Debian 12: `deb http://deb.debian.org/debian-security "
    "bookworm-security main`; Ubuntu: `<codename>-security`), then `apt update`.",
    fix_role="host_baseline: host_baseline_security_updates",
    shown=state_of("security source"),
)
def security_source(facts: dict[str, Any], _threshold: Any) -> Outcome:
    state = unattended_upgrades(facts)
    if not (isinstance(state, dict) and state.get("installed") and state.get("enabled") is True):
        return skipped("automatic updates are off (PKG-1010)")
    apt = need(facts, _APT_SOURCES)
    security = need(facts, f"{_APT_SOURCES}.security")
    if security:
        return passed("present", ", ".join(sorted({f"{s['uri']} {s['suite']}" for s in security})))
    return failed("absent", f"{len(apt.get('sources', []))} APT source(s), none of them a security suite")




_PARTS = (("kernel_module", "kernel module"), ("library", "library"), ("package", "package"))


@check(
    "PKG-1040",
    title="NVIDIA kernel module and libraries at one version",
    op="==",
    threshold="none",
    requirement="the loaded NVIDIA kernel module, its user-space library and its package must be one version",
    why="An upgrade of the driver's libraries under a loaded kernel module (an unattended upgrade "
    "without a reboot) leaves NVML and every GPU container failing with 'Driver/library version "
    "mismatch' at the next job start, not at the upgrade.",
    fix="Reboot in a maintenance window to load the module that matches the libraries, then hold the "
    "NVIDIA packages so it does not happen again.",
    fix_role="host_baseline: host_baseline_hold_nvidia",
)
def driver_versions(facts: dict[str, Any], _threshold: Any) -> Outcome:
    parts = need(facts, _VERSIONS)
    known = {label: parts.get(key) for key, label in _PARTS if isinstance(parts.get(key), str)}
    reason = lookup(facts, "gpu.nvml.reason")
    said_mismatch = isinstance(reason, str) and "mismatch" in reason.lower()
    text = ", ".join(f"{label} {version}" for label, version in known.items())
    if len(set(known.values())) > 1 or said_mismatch:
        return failed(text or "NVML: driver/library version mismatch", reason if said_mismatch else "")
    module = parts.get("kernel_module")
    if isinstance(module, Unknown):
        if not known:
            return skipped("no NVIDIA driver installed")
        return unknown(f"{module.reason}; {text} installed")
    if len(known) < 2:
        missing = "; ".join(parts[k].reason for k, _ in _PARTS if isinstance(parts.get(k), Unknown))
        return unknown(f"only the {text} is known: {missing}")
    return passed(text)


@check(
    "PKG-1050",
    title="No reboot pending",
    op="==",
    threshold="none",
    requirement="a reboot a package asked for must not be pending",
    why="Until the reboot, the machine runs the old kernel and modules beside new libraries: an "
    "NVIDIA driver upgrade waiting for it fails the next GPU job, and the reboot itself, when it "
    "comes unplanned, ends renters' jobs.",
    fix="Reboot in a maintenance window (after unlisting or scheduling it with the platform).",
)
def reboot_pending(facts: dict[str, Any], _threshold: Any) -> Outcome:
    state = need(facts, _REBOOT)
    if not need(facts, f"{_REBOOT}.pending"):
        return passed("none pending")
    packages = state.get("packages")
    names = packages if isinstance(packages, list) else []
    nvidia = [n for n in names if "nvidia" in n]
    listed = ", ".join((nvidia + [n for n in names if n not in nvidia])[:5])
    return failed("reboot pending", f"asked by {listed}" if listed else "")
