"""Readers of the facts that more than one check family (and fleet, earnings, the renderers)
use: listening sockets, the firewall's judgement, Docker's reachability and containers, the
chassis, the CPU architecture, the GPU count, sshd's ports, the desktop, personal data,
recorded values.

A reader returns a fact as collected, or raises :class:`~hostcheck.errors.Missing` where a check
cannot go on without it; it decides nothing. The families (every other module of this package
but ``base``) take what they share from here, never from one another
(``tests/unit/test_import_layers.py`` holds them to it). What two families judge alike is
here too: :func:`personal_use`, the isolation check's answer that the provider-agent check
builds on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hostcheck.checks.base import Outcome, failed, known_devices, need, passed, unknown
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.firewall.summary import summarise

FIREWALL = "network.firewall"
DEFAULT_ROUTE = "network.default_route"
CHASSIS = "power.chassis_type"
SSH_SETTINGS = "ssh.settings"
AGENTS_INSTALLED = "agents.installed"
NVIDIA_VERSIONS = "packages.nvidia_versions"
REBOOT_REQUIRED = "packages.reboot_required"
"""The fact paths the families read here and in their own checks, spelled once."""


def recorded_firewall(facts: dict[str, Any]) -> Any:
    """The firewall's ruleset as recorded (evidence the checks judge), or an :class:`Unknown`."""
    return lookup(facts, FIREWALL)


def recorded_route(facts: dict[str, Any]) -> Any:
    """The default route as collected (interface, gateway, link, addressing), None, or an :class:`Unknown`."""
    return lookup(facts, DEFAULT_ROUTE)


def recorded_interfaces(facts: dict[str, Any]) -> Any:
    """The network interfaces as collected, or an :class:`Unknown`."""
    return lookup(facts, "network.interfaces")


def listening_sockets(facts: dict[str, Any]) -> Any:
    """The sockets listening on this host; :class:`Missing` when they are not known."""
    return need(facts, "network.listening")


def measured_bandwidth(facts: dict[str, Any]) -> Any:
    """What the speed test measured (``download_mbps``, ``upload_mbps``, ...), or an :class:`Unknown`."""
    return lookup(facts, "network.bandwidth")


def firewall_summary(facts: dict[str, Any], path: str = FIREWALL) -> dict[str, Any]:
    """``network.firewall`` judged from the recorded ruleset with today's rules;
    :class:`Missing` under ``path`` when the firewall could not be read."""
    firewall = recorded_firewall(facts)
    if isinstance(firewall, Unknown):
        raise Missing(path, firewall.reason)
    summary = summarise(firewall) if isinstance(firewall, dict) else Unknown("network.firewall is not a mapping")
    if isinstance(summary, Unknown):
        raise Missing(path, summary.reason)
    return summary


def summary_fact(summary: dict[str, Any], key: str) -> Any:
    """One key of the firewall's judgement; :class:`Missing` when it could not be judged."""
    value = summary.get(key, Unknown(f"the firewall summary has no {key}"))
    if isinstance(value, Unknown):
        raise Missing(f"network.firewall.{key}", value.reason)
    return value


class DockerReach(NamedTuple):
    """Whether the Docker daemon answered, each as collected (a value or an :class:`Unknown`)."""

    reachable: Any
    """True when the daemon answered."""
    reason: Any
    """Why it did not ("absent": Docker is not installed)."""


def docker_reachability(facts: dict[str, Any]) -> DockerReach:
    return DockerReach(lookup(facts, "docker.reachable"), lookup(facts, "docker.unreachable_reason"))


def known_containers(facts: dict[str, Any]) -> list[Any]:
    """The running containers; :class:`Missing` when they could not be listed."""
    path = "docker.containers"
    containers = need(facts, path)
    if not isinstance(containers, list):
        raise Missing(path, "not a list")
    return containers


NOT_SUPPORTED = "not supported by this GPU/driver"  # the collector's reason for a missing feature


def unattended_upgrades(facts: dict[str, Any]) -> dict[str, Any]:
    """Whether unattended-upgrades is installed and enabled (``installed``, ``enabled``);
    :class:`Missing` when that is not known (``enabled`` matters only once it is installed)."""
    state: dict[str, Any] = need(facts, "packages.unattended_upgrades")
    if need(facts, "packages.unattended_upgrades.installed") is True:
        need(facts, "packages.unattended_upgrades.enabled")
    return state


APPLE_ARCHES = ("arm64", "aarch64")
"""How the kernel names Apple Silicon."""


def gpu_count(facts: dict[str, Any]) -> int:
    """GPUs to share the host between (at least 1, so per-GPU shares stay defined)."""
    return max(1, len(known_devices(facts)))


def cpu_arch(facts: dict[str, Any]) -> str:
    """The CPU architecture as the kernel names it ("x86_64", "arm64"); :class:`Missing` when not known."""
    return str(need(facts, "system.cpu_arch"))


def chassis(facts: dict[str, Any]) -> tuple[Any, Any]:
    """The chassis as collected, each a value or an :class:`Unknown`: its type word and its SMBIOS
    type code (what :func:`hostcheck.knowledge.laptop.laptop_verdict` weighs)."""
    return lookup(facts, CHASSIS), lookup(facts, "power.chassis_type_code")


def ssh_ports(facts: dict[str, Any]) -> set[str]:
    """The ports sshd listens on ("22" when they are not known)."""
    settings = lookup(facts, SSH_SETTINGS)
    if isinstance(settings, dict) and settings.get("port") is not None:
        port = settings["port"]
        return {str(p) for p in (port if isinstance(port, list) else [port])}
    return {"22"}


def display_manager(facts: dict[str, Any]) -> Any:
    """The display manager installed: its name, '' or None when there is none; :class:`Missing`
    when that is not known."""
    return need(facts, "isolation.display_manager")


def graphical_session(facts: dict[str, Any]) -> Any:
    """Whether a graphical session is running; :class:`Missing` when that is not known."""
    return need(facts, "isolation.graphical_session")


INBOUND_PORTS = "network.inbound.ports"


def recorded_agents(facts: dict[str, Any]) -> Any:
    """The agents the collector found (``agents.installed``), or an :class:`Unknown`."""
    return lookup(facts, AGENTS_INSTALLED)


def recorded_driver_versions(facts: dict[str, Any]) -> Any:
    """The NVIDIA driver's parts as collected (kernel_module, library, package), or an :class:`Unknown`."""
    return lookup(facts, NVIDIA_VERSIONS)


def recorded_reboot(facts: dict[str, Any]) -> Any:
    """The pending-reboot state as collected ({pending, packages}), or an :class:`Unknown`."""
    return lookup(facts, REBOOT_REQUIRED)


PERSONAL_KINDS = {"browser_profile", "password_store"}


def credentials(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The credentials found in home directories; :class:`Missing` when they are not known."""
    creds = need(facts, "isolation.credentials")
    return [c for c in creds if isinstance(c, dict)]


def unreadable_homes(facts: dict[str, Any]) -> int:
    """How many home directories could not be read (0 when that is not known)."""
    homes = lookup(facts, "isolation.unreadable_homes")
    return len(homes) if isinstance(homes, list) else 0


def unreadable_note(facts: dict[str, Any]) -> str:
    homes = unreadable_homes(facts)
    return f"; {homes} home(s) could not be read" if homes else ""


def personal_use(facts: dict[str, Any]) -> Outcome:
    """Whether the machine shows personal use (a desktop session, a display manager, personal
    browser or password data): ISO-1010's answer, which the owner-risk check of a provider agent
    holding root builds on."""
    evidence = []
    session = graphical_session(facts)
    manager_unknown: str | None = None
    try:
        manager = display_manager(facts)
    except Missing as missing:
        manager, manager_unknown = None, missing.reason
    if session:
        evidence.append("a graphical desktop session is running")
    if isinstance(manager, str) and manager:
        evidence.append(f"display manager {manager}")
    personal = sorted({c.get("user", "?") for c in credentials(facts) if c.get("kind") in PERSONAL_KINDS})
    if personal:
        evidence.append(f"personal browser/password data for {', '.join(personal)}")
    if evidence == [f"display manager {manager}"]:
        # Only the login screen says "personal": an owner who dedicated a desktop install must
        # hear that removing it is all this check asks.
        return failed("a desktop install", f"display manager {manager} installed")
    if evidence:
        return failed("personal use", "; ".join(evidence))
    if manager_unknown is not None:
        return unknown(f"display manager state unknown: {manager_unknown}")
    return passed("no desktop, no personal data" + unreadable_note(facts))
