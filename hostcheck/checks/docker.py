"""Docker daemon checks (DOC-*): the daemon's settings, its runtime, published ports, other engines."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from hostcheck.checks.base import Outcome, check, failed, family, need, pass_if, passed, state_of, unknown
from hostcheck.checks.readers import docker_reachability, firewall_summary, summary_fact
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.knowledge.docker_settings import (
    ICC,
    LIVE_RESTORE,
    NO_NEW_PRIVILEGES,
    USERLAND_PROXY,
    USERNS_REMAP,
    DaemonSetting,
)

DOC = family("DOC", "Docker daemon", order=60)


# "absent" is no daemon socket: the docker client may well be installed, the daemon is not there.
DOCKER_ABSENT = ("no Docker daemon runs here (no socket at /var/run/docker.sock): its settings are judged once one "
                 "does; the docker_host role installs and sets it")


def _docker_setting(facts: dict[str, Any], setting: DaemonSetting) -> tuple[Any, str]:
    """A daemon setting: from the running daemon, else daemon.json, else Docker's default."""
    value = lookup(facts, f"docker.{setting.fact}")
    if not isinstance(value, Unknown) and value is not None:
        return value, "daemon"
    reason = docker_reachability(facts).reason
    daemon_json = lookup(facts, "docker.daemon_json")
    if isinstance(daemon_json, dict):
        return daemon_json.get(setting.key, setting.default), "daemon.json"
    if reason == "absent":
        raise Missing("docker", DOCKER_ABSENT)
    raise Missing(f"docker.{setting.fact}", value.reason if isinstance(value, Unknown) else "not reported")


def _unreachable(facts: dict[str, Any]) -> Any:
    """None when the daemon answered, else why not ("absent": Docker is not installed)."""
    reachable, reason = docker_reachability(facts)
    return None if reachable is True else reason


def _docker_flag(setting: DaemonSetting, want: bool) -> Any:
    def judge(facts: dict[str, Any], _threshold: Any) -> Outcome:
        value, origin = _docker_setting(facts, setting)
        return pass_if(bool(value) == want, "on" if value else "off", f"from {origin}")

    return judge


class DaemonFlagCheck(NamedTuple):
    """A DOC-* check that one on/off daemon setting has the value a rented host needs."""

    id: str
    title: str
    setting: DaemonSetting
    want: bool
    why: str
    role_variable: str
    """The docker_host variable that sets it."""
    requirement: str

    @property
    def fix(self) -> str:
        return f'"{self.setting.key}": {json.dumps(self.want)} in /etc/docker/daemon.json'


DAEMON_FLAG_CHECKS = (
    DaemonFlagCheck(
        "DOC-1020",
        "Containers cannot gain privileges (no-new-privileges)",
        NO_NEW_PRIVILEGES,
        want=True,
        why="Stops setuid binaries inside a customer's container from gaining more privileges.",
        role_variable="docker_host_no_new_privileges",
        requirement="containers must not gain privileges (no-new-privileges on)",
    ),
    DaemonFlagCheck(
        "DOC-1030",
        "Containers survive a daemon restart (live-restore)",
        LIVE_RESTORE,
        want=True,
        why="Without live-restore a Docker upgrade or restart kills every customer's job.",
        role_variable="docker_host_live_restore",
        requirement="containers must survive a daemon restart (live-restore on)",
    ),
    DaemonFlagCheck(
        "DOC-1040",
        "Inter-container traffic off (icc)",
        ICC,
        want=False,
        why="Containers of different customers on the default bridge can otherwise reach each other.",
        role_variable="docker_host_icc",
        requirement="traffic between containers must be off (icc off)",
    ),
    DaemonFlagCheck(
        "DOC-1050",
        "Userland proxy off",
        USERLAND_PROXY,
        want=False,
        why="The userland proxy makes published ports reachable on loopback and hides client addresses.",
        role_variable="docker_host_userland_proxy",
        requirement="Docker's userland proxy must be off",
    ),
)

for _flag in DAEMON_FLAG_CHECKS:
    check(
        _flag.id,
        title=_flag.title,
        op="==",
        threshold="none",
        why=_flag.why,
        fix=_flag.fix,
        fix_role=f"docker_host: {_flag.role_variable}",
        shown=state_of(_flag.setting.key),
        requirement=_flag.requirement,
    )(_docker_flag(_flag.setting, _flag.want))


@check(
    "DOC-1010",
    title="NVIDIA container runtime configured",
    op="==",
    threshold="none",
    why="Without the NVIDIA runtime (nvidia-container-toolkit) containers cannot see the GPU.",
    fix="Install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`.",
    fix_role="docker_host: docker_host_nvidia_runtime",
    shown=lambda value: "no container runtime listed" if value == "none" else f"runtimes: {value}"
    if value != "Docker not installed" else str(value),
)
def nvidia_runtime(facts: dict[str, Any], _threshold: Any) -> Outcome:
    if (reason := _unreachable(facts)) is not None:
        if reason == "absent":
            return failed("Docker not installed")
        return unknown(f"Docker daemon not reachable ({reason})")
    runtimes = need(facts, "docker.runtimes")
    return passed(", ".join(runtimes)) if "nvidia" in runtimes else failed(", ".join(runtimes) or "none")


@check(
    "DOC-1060",
    title="Container isolation from host root (userns-remap or rootless)",
    op="==",
    threshold="none",
    why="Without user namespaces, root in a container is root on the host if it escapes.",
    fix='"userns-remap": "default" in daemon.json (check your platform supports it) or rootless Docker.',
    fix_role="docker_host: docker_host_daemon_options",
    shown=state_of("user namespaces"),
    requirement="root in a container must not be root on the host (userns-remap or rootless Docker)",
)
def userns(facts: dict[str, Any], _threshold: Any) -> Outcome:
    remap, origin = _docker_setting(facts, USERNS_REMAP)
    rootless = lookup(facts, "docker.rootless")
    on = bool(remap) or rootless is True
    return pass_if(on, "on" if on else "off", f"from {origin}")


@check(
    "DOC-1070",
    title="Published container ports filtered by the firewall",
    op="==",
    unit="ports",
    threshold="none",
    why="Docker inserts its own rules ahead of ufw/INPUT, so a published port is open to the "
    "world even when the firewall 'denies incoming'; `ufw status` then gives false assurance.",
    fix="Filter the forward path (DOCKER-USER chain or an nftables forward hook before Docker's).",
    fix_role="firewall: firewall_enabled",
)
def published_ports_filtered(facts: dict[str, Any], _threshold: Any) -> Outcome:
    if (reason := _unreachable(facts)) is not None:
        if reason == "absent":
            return passed(0, "Docker not installed: no published ports")
        return unknown(f"Docker daemon not reachable ({reason}): published ports unknown")
    ports = need(facts, "docker.published_ports")
    exposed = [p for p in ports if p.get("host_ip") not in ("127.0.0.1", "::1")]
    if not exposed:
        return passed(0)
    path = "network.firewall.docker_user_chain_filters"
    filtered = summary_fact(firewall_summary(facts, path), "docker_user_chain_filters")
    shown = ", ".join(f"{p.get('host_port')}/{p.get('proto')}" for p in exposed)
    return passed(len(exposed), f"filtered: {shown}") if filtered else failed(len(exposed), f"unfiltered: {shown}")


@check(
    "DOC-1080",
    title="No other container engine installed",
    op="==",
    threshold="none",
    why="Salad's Linux client ships its own containerd and requires that no other Docker or "
    "containerd is on the machine.",
    fix="Remove Docker (`apt-get purge docker.io docker-ce containerd`) before installing Salad's client.",
)
def no_other_engine(facts: dict[str, Any], _threshold: Any) -> Outcome:
    reachable, reason = docker_reachability(facts)
    if reachable is True:
        return failed("Docker running")
    if reason == "absent":
        return passed("no Docker")
    for value in (reachable, reason):
        if isinstance(value, Unknown):
            return unknown(value.reason)
    return failed(f"Docker installed ({reason})")
