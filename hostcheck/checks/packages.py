"""Package checks (PKG-*): automatic security updates, their source, the held NVIDIA driver."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import Outcome, check, failed, need, passed, skipped, state_of

_UNATTENDED = "packages.unattended_upgrades"
_APT_SOURCES = "packages.apt_sources"


def unattended_upgrades(facts: dict[str, Any]) -> dict[str, Any]:
    """Whether unattended-upgrades is installed and enabled (``installed``, ``enabled``);
    :class:`Missing` when that is not known (``enabled`` matters only once it is installed)."""
    state: dict[str, Any] = need(facts, _UNATTENDED)
    if need(facts, f"{_UNATTENDED}.installed") is True:
        need(facts, f"{_UNATTENDED}.enabled")
    return state


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
