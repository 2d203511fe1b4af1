"""Provider agents installed on this machine: their accounts, sudo rules, units, update channel,
packages, and what sudo logged them running. Never touches a container: the containers an agent
runs are named by the Docker collector (``docker.containers``) and matched by the checks.

What to look for comes from the agent catalog (policies/agents/agents.yaml), which cites the
installers each name was taken from. The sudoers files are kept as read (bounded), and the AGT
checks work out what they grant each agent account. sudoers is root-only on every distribution
(0440): an unprivileged audit keeps why it could not be read, and the checks say unknown.
"""

from __future__ import annotations

import grp
import os
import re
import time
from pathlib import Path
from typing import Any

from hostcheck.collectors._run import read_text, run_command
from hostcheck.collectors.accounts import (
    PasswdEntry,
    _exists,
    parse_group,
    parse_passwd,
    sudo_identity,
    sudoers_record,
)
from hostcheck.collectors.docker_config import UNIT_DIRS
from hostcheck.facts import Unknown
from hostcheck.knowledge.agent_catalog import Agent, load_catalog

SECTION = "agents"
TIMEOUT = 6.0

DEFAULT_SINCE_S = 7 * 24 * 3600
JOURNAL_MAX_ENTRIES = 2000
JOURNAL_TIMEOUT_S = 3.0
MAX_COMMANDS_SHOWN = 20
MAX_COMMAND_CHARS = 200
JOURNAL_GROUPS = ("systemd-journal", "adm", "wheel")
# The units Vast's headless install guide has the owner turn off (timers disabled, services
# masked), and unattended-upgrades' own.
UPDATE_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "apt-daily.service", "apt-daily-upgrade.service",
                "unattended-upgrades.service")
# Kernel parameters the agents' installers set (Vast VMs, TensorDock's VFIO passthrough).
KERNEL_PARAMS = ("nvidia_drm.modeset", "intel_iommu", "amd_iommu", "iommu", "vfio-pci.ids",
                 "vfio_iommu_type1.allow_unsafe_interrupts")
DPKG_INFO = Path("/var/lib/dpkg/info")
# sudo's syslog line: "USER : [TTY=... ; ]PWD=... ; USER=root ; COMMAND=..." (or a refusal
# "USER : command not allowed ; ...").
REFUSALS = ("command not allowed", "a password is required", "incorrect password", "user NOT in sudoers")
SUDO_LINE = re.compile(r"^\s*(?P<user>[^\s:]+) : (?P<rest>.*)$")
# systemd's state words ("active", "auto-restart", "exit-code", ...): anything else is not
# systemd's answer and is not passed on.
STATE_WORD = re.compile(r"^[a-z][a-z-]{0,31}$")
MAX_RESTARTS_DIGITS = 9
UNIT_PROPERTIES = "Id,LoadState,UnitFileState,ActiveState,SubState,Result,NRestarts"


def parse_unit_show(text: str) -> dict[str, dict[str, str]]:
    """``systemctl show -p Id,LoadState,UnitFileState,... U...`` -> {unit: properties}.
    One call answers every unit, missing ones included (LoadState=not-found)."""
    units: dict[str, dict[str, str]] = {}
    for block in text.split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            units[props["Id"]] = props
    return units


def _state_word(props: dict[str, str], key: str, unit: str) -> str | Unknown:
    value = props.get(key, "")
    return value if STATE_WORD.match(value) else Unknown(f"systemctl show {unit}: no {key}")


def restart_count(props: dict[str, str], unit: str) -> int | Unknown:
    """systemd's NRestarts: automatic restarts since the unit was last started by hand (systemd
    235 and later)."""
    value = props.get("NRestarts", "").strip()
    if not value:
        return Unknown(f"systemctl show {unit}: no NRestarts (systemd older than 235)")
    if not value.isdigit() or not value.isascii() or len(value) > MAX_RESTARTS_DIGITS:
        return Unknown(f"systemctl show {unit}: NRestarts {value[:20]!r} is not a count")
    return int(value)


def unit_states(units: tuple[str, ...]) -> dict[str, dict[str, Any]] | Unknown:
    if not units:
        return {}
    if not os.path.isdir("/run/systemd/system"):
        # systemd is not the init: report unit files only (nothing can be running under it).
        return {u: {"name": u, "enabled": Unknown("systemd is not the running init"), "active": False,
                    "restarts": Unknown("systemd is not the running init"),
                    "present": any(os.path.lexists(f"{d}/{u}") for d in UNIT_DIRS)} for u in units}
    res = run_command(["systemctl", "show", "-p", UNIT_PROPERTIES, "--", *units], timeout=2.0)
    if isinstance(res, Unknown):
        return Unknown(f"cannot ask systemd about units: {res.reason}")
    shown = parse_unit_show(res.stdout)
    return {unit: unit_state(unit, shown.get(unit, {})) for unit in units}


def unit_state(unit: str, props: dict[str, str]) -> dict[str, Any]:
    """One unit's facts from its ``systemctl show`` properties (empty when systemd did not list it)."""
    load = props.get("LoadState", "")
    return {
        "name": unit,
        "present": load in ("loaded", "masked", "error", "bad-setting"),
        "enabled": props.get("UnitFileState") or ("masked" if load == "masked" else "not-found" if load == "not-found"
                                                   else Unknown(f"systemctl show {unit}: no UnitFileState")),
        "active": props.get("ActiveState") == "active",
        "active_state": _state_word(props, "ActiveState", unit),
        "sub_state": _state_word(props, "SubState", unit),
        "result": _state_word(props, "Result", unit),
        "restarts": restart_count(props, unit),
    }


def _package_installed(name: str) -> bool:
    # dpkg keeps NAME.list (or NAME:ARCH.list) for every installed package: a cheap lookup
    # that does not read the whole status database again.
    try:
        return any(p.name == f"{name}.list" or p.name.startswith(f"{name}:") and p.name.endswith(".list")
                   for p in DPKG_INFO.glob(f"{name}*.list"))
    except OSError:
        return False


def _evidence(agent: Agent, passwd: dict[str, PasswdEntry], units: dict[str, dict[str, Any]] | Unknown) -> list[str]:
    found = [f"account {name}" for name in agent.accounts if name in passwd]
    if isinstance(units, dict):
        found += [f"unit {u}" for u in agent.units if units.get(u, {}).get("present")]
    found += [f"path {p}" for p in agent.paths if _exists(p) is True]
    found += [f"package {p}" for p in agent.packages if _package_installed(p)]
    return found


def kernel_params(cmdline: str) -> dict[str, str]:
    """The parameters the agents' installers set, as given on the kernel command line."""
    out: dict[str, str] = {}
    for token in cmdline.split():
        key, _, value = token.partition("=")
        if key in KERNEL_PARAMS:
            out[key] = value[:200]
    return out


def can_read_journal() -> bool:
    if os.geteuid() == 0:
        return True
    names = set()
    for gid in os.getgroups():
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return bool(names & set(JOURNAL_GROUPS))


def summarise_sudo_journal(lines: list[str], accounts: set[str]) -> dict[str, Any]:
    """Count what each agent account ran through sudo (and what sudo refused it)."""
    import json

    counts: dict[tuple[str, str, str], int] = {}
    total = 0
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("MESSAGE") if isinstance(entry, dict) else None
        if not isinstance(message, str):
            continue
        match = SUDO_LINE.match(message)
        if not match or match.group("user") not in accounts:
            continue
        rest = match.group("rest")
        command = rest.split("COMMAND=", 1)[1] if "COMMAND=" in rest else ""
        outcome = "refused" if any(word in rest for word in REFUSALS) else "ran"
        key = (match.group("user"), command[:MAX_COMMAND_CHARS], outcome)
        counts[key] = counts.get(key, 0) + 1
        total += 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_COMMANDS_SHOWN]
    return {
        "entries": total,
        "commands": [{"user": u, "command": c, "outcome": o, "count": n} for (u, c, o), n in top],
    }


def sudo_activity(accounts: set[str], since: float) -> dict[str, Any] | Unknown:
    if not accounts:
        return {"since": _iso(since), "entries": 0, "commands": []}
    if not can_read_journal():
        return Unknown("the system journal is readable only by root and the systemd-journal or adm "
                       "group; run as root or add the auditing user to systemd-journal")
    res = run_command(["journalctl", "--no-pager", "-q", "-o", "json", f"--since=@{int(since)}",
                       "SYSLOG_IDENTIFIER=sudo", "-n", str(JOURNAL_MAX_ENTRIES)], timeout=JOURNAL_TIMEOUT_S)
    if isinstance(res, Unknown):
        return Unknown(f"cannot read sudo's journal entries: {res.reason}")
    if res.returncode != 0:
        return Unknown(f"journalctl: {res.stderr.strip()[:200] or f'exit {res.returncode}'}")
    summary = summarise_sudo_journal(res.stdout.splitlines()[:JOURNAL_MAX_ENTRIES], accounts)
    return {"since": _iso(since), **summary}


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def collect(ctx: Any) -> dict[str, Any]:
    catalog = load_catalog()
    passwd_text = read_text("/etc/passwd")
    group_text = read_text("/etc/group")
    if isinstance(passwd_text, Unknown):
        return {"installed": Unknown(f"cannot list accounts: {passwd_text.reason}")}
    passwd = {e.name: e for e in parse_passwd(passwd_text)}
    groups = [] if isinstance(group_text, Unknown) else parse_group(group_text)
    every_unit = tuple(dict.fromkeys([u for a in catalog.agents for u in a.units] + list(UPDATE_UNITS)))
    states = unit_states(every_unit)
    installed: list[dict[str, Any]] = []
    agent_accounts: set[str] = set()
    for agent in catalog.agents:
        evidence = _evidence(agent, passwd, states)
        if not evidence:
            continue
        accounts = []
        for name in agent.accounts:
            entry = passwd.get(name)
            if entry is None:
                continue
            agent_accounts.add(name)
            accounts.append({**sudo_identity(entry, groups), "shell": entry.shell})
        units = ([states[u] for u in agent.units if states[u].get("present")] if isinstance(states, dict) else states)
        installed.append({
            "id": agent.id,
            "platform": agent.platform,
            "evidence": evidence,
            "accounts": accounts,
            "units": units,
            "update_channel": [p for p in agent.update_channel.paths if _exists(p) is True],
            "packages": [p for p in agent.packages if _package_installed(p)],
        })
    cmdline = read_text("/proc/cmdline", limit=8192)
    since = getattr(ctx, "agent_since", None) or time.time() - DEFAULT_SINCE_S
    return {
        "installed": installed,
        # The rules as read, for the checks to judge (what sudo grants each account); read only
        # when an agent account is there to judge.
        "sudoers": sudoers_record() if agent_accounts else None,
        "update_units": {u: states[u]["enabled"] for u in UPDATE_UNITS} if isinstance(states, dict) else states,
        "kernel_params": cmdline if isinstance(cmdline, Unknown) else kernel_params(cmdline),
        "sudo_activity": sudo_activity(agent_accounts, float(since)),
    }
