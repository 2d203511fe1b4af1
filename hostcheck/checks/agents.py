"""Provider-agent checks (AGT-*, OWN-1050): what the platform's own agent holds on this machine.

An agent is "installed" when the agents collector found its account, unit, path or package,
or when a running container runs one of its images (``docker.containers``). What
each agent is known to do comes from the agent catalog (policies/agents/agents.yaml), whose
entries cite the installers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hostcheck.checks.base import Outcome, check, failed, family, known_devices, need, passed, unknown
from hostcheck.checks.readers import AGENTS_INSTALLED as _INSTALLED
from hostcheck.checks.readers import (
    NOT_SUPPORTED,
    docker_reachability,
    known_containers,
    personal_use,
    unattended_upgrades,
)
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.knowledge.agent_catalog import Agent, conflicts, load_catalog
from hostcheck.knowledge.sudoers.recorded import account_grants, replayed
from hostcheck.models import Status

AGT = family("AGT", "Provider agent", order=130)



def _containers(facts: dict[str, Any]) -> tuple[list[Any], str]:
    """The running containers, and why they could not be listed ('' when they could, or when
    Docker is not installed at all: then there are none)."""
    try:
        return known_containers(facts), ""
    except Missing as missing:
        return [], "" if docker_reachability(facts).reason == "absent" else missing.reason


def installed_agents(facts: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The installed agents (the collector's, plus those only their containers show) and, when
    the running containers could not be listed, why (agents known only by their containers
    may then be missing)."""
    found = [dict(a) for a in need(facts, _INSTALLED) if isinstance(a, dict) and a.get("id")]
    if any(item.get("accounts") for item in found):
        loaded = replayed(lookup(facts, "agents.sudoers"))
        for item in found:
            item["accounts"] = [{**a, "sudo": account_grants(loaded, a)} for a in item.get("accounts") or []
                                if isinstance(a, dict)]
    containers, blind = _containers(facts)
    # Docker names io.net's containers at random; their images say what they are
    # (ionetcontainers/io-worker-vc:TAG): match the image's last path component, or the name.
    names = set()
    for c in containers:
        if isinstance(c, dict):
            image = str(c.get("image", "")).split("@", 1)[0]
            names.add(image.rsplit("/", 1)[-1].split(":", 1)[0])
            names.add(str(c.get("name")))
    catalog = load_catalog()
    for agent in catalog.agents:
        seen = sorted(names & set(agent.containers))
        if not seen:
            continue
        entry = next((a for a in found if a["id"] == agent.id), None)
        evidence = [f"container image {name}" for name in seen]
        if entry is None:
            found.append({"id": agent.id, "platform": agent.platform, "evidence": evidence, "accounts": [],
                          "units": [], "update_channel": [], "packages": []})
        else:
            entry["evidence"] = [*entry.get("evidence", []), *evidence]
    return found, blind


def _agent(entry: dict[str, Any]) -> Agent | None:
    return load_catalog().get(str(entry.get("id")))


def unseen(blind: str, agents: list[dict[str, Any]], which: Callable[[Agent], bool]) -> list[Agent]:
    """Agents known only by their running containers that ``which`` selects and that could be
    here unseen: the containers could not be listed (``blind``) and they were not found."""
    if not blind:
        return []
    found = {str(e.get("id")) for e in agents}
    return [a for a in load_catalog().agents if a.container_only and a.id not in found and which(a)]


def _blind_text(missed: list[Agent], blind: str) -> str:
    names = ", ".join(a.platform for a in missed)
    return (f"{names}'s agent is recognised only by its running containers, which could not be listed "
            f"({blind}); run the audit as root or as a member of the docker group")


def _platform(entry: dict[str, Any]) -> str:
    return str(entry.get("platform") or entry.get("id"))


def _root_by_account(account: dict[str, Any]) -> tuple[bool | None, str]:
    """(holds root?, how) for one agent account; None when sudoers could not be read and no
    other route (the docker group) settles it."""
    name = account.get("name", "?")
    groups = account.get("groups") or []
    sudo = account.get("sudo")
    docker = "docker" in groups
    if isinstance(sudo, Unknown):
        if docker:
            return True, f"{name} is in the docker group (root-equivalent); its sudo rules: unknown ({sudo.reason})"
        return None, f"{name}: sudo rules unknown ({sudo.reason})"
    if not isinstance(sudo, dict):
        return (True, f"{name} is in the docker group (root-equivalent)") if docker else (None, f"{name}: sudo rules not collected")
    rules = [r for r in sudo.get("rules", []) if isinstance(r, dict)]
    where = "; ".join(f"`{r.get('rule')}` ({r.get('file')}:{r.get('line')})" for r in rules[:3])
    gaps = [str(g) for g in sudo.get("gaps") or []]
    if sudo.get("scope") == "unrestricted":
        nopasswd = all(r.get("nopasswd") for r in rules)
        return True, f"{name} may run any command as root{' without a password' if nopasswd else ''}: {where}"
    giving = sudo.get("root_giving") or []
    if giving:
        return True, (f"{name} has a sudo allowlist ({where}), but {len(giving)} allowed command(s) can be "
                      f"turned into a root shell (inference), e.g. `{giving[0]}`")
    if docker:
        return True, f"{name} is in the docker group (root-equivalent)" + (f"; sudo: {where}" if where else "")
    if sudo.get("scope") == "unknown" or gaps:
        found = f"the rules read give no root ({where})" if where else "the rules read give it nothing"
        return None, f"{name}: sudo rules not fully read, {found}: {'; '.join(gaps[:3])}"
    return False, f"{name}: sudo limited to {len(rules)} rule(s) that give no shell" if rules else f"{name}: no sudo rules"


def agent_root(entry: dict[str, Any]) -> tuple[bool | None, str]:
    """Whether this installed agent holds root, and the words that say how."""
    accounts = [a for a in entry.get("accounts") or [] if isinstance(a, dict)]
    platform = _platform(entry)
    if not accounts:
        agent = _agent(entry)
        why = agent.takes[0].what if agent else "its services"
        return True, f"{platform}'s agent runs as root through the host's services ({why})"
    verdicts = [_root_by_account(a) for a in accounts]
    if any(v is True for v, _ in verdicts):
        return True, f"{platform}: " + "; ".join(how for v, how in verdicts if v is True)
    if any(v is None for v, _ in verdicts):
        return None, f"{platform}: " + "; ".join(how for v, how in verdicts if v is None)
    return False, f"{platform}: " + "; ".join(how for _, how in verdicts)


@check(
    "AGT-1010",
    title="No provider agent holds root on this machine",
    op="==",
    unit="agents",
    threshold="none",
    why="A host agent that may run any command as root (passwordless sudo for everything, or "
    "membership of the docker group) hands the platform root on this machine: whoever controls "
    "the agent or its update server can read and change everything here. Vast's installer gives "
    "vastai_kaalia `ALL=(ALL) NOPASSWD:ALL` and the docker group; TensorDock's gives tensordock "
    "the same sudo rule. Installing such an agent is a decision to trust the platform with root.",
    fix="Host only on a machine you are willing to hand to the platform (nothing personal on it). "
    "Record what the agent runs with sudo's own logging (agent_oversight role); a sudo allowlist "
    "is a tripwire, not containment: `hostcheck explain vast`.",
    fix_role="agent_oversight: agent_oversight_sudo_logging",
    says_agent_has_root=True,
    superseded_by="OWN-1050",  # on a personal machine OWN-1050 says this, and more
)
def agent_holds_root(facts: dict[str, Any], _threshold: Any) -> Outcome:
    agents, blind = installed_agents(facts)
    missed = unseen(blind, agents, lambda a: True)
    holding = []
    undecided = []
    for entry in agents:
        verdict, how = agent_root(entry)
        if verdict is True:
            holding.append(how)
        elif verdict is None:
            undecided.append(how)
    if holding:
        return failed(len(holding), "the platform has root on this machine: " + " | ".join(holding))
    if undecided:
        return unknown(" | ".join(undecided), 0)
    if missed:
        return unknown(_blind_text(missed, blind), 0)
    if not agents:
        return passed(0, "no provider agent installed")
    return passed(0, " | ".join(agent_root(e)[1] for e in agents))


@check(
    "OWN-1050",
    title="No provider agent with root on a personal machine",
    op="==",
    threshold="none",
    why="On a personal machine the agent's root reaches the owner's own accounts, files, browser "
    "sessions and credentials: installing it hands the platform everything the owner keeps there.",
    fix="Do not install a provider agent on a machine you use yourself; use a dedicated machine "
    "(or a separate disk with its own server install).",
    fix_role="isolation: isolation_enabled",
    dedicated_only=True,
)
def agent_root_on_personal_machine(facts: dict[str, Any], threshold: Any) -> Outcome:
    root = agent_holds_root(facts, threshold)
    if root.status == Status.PASS:
        return passed("no agent with root", root.detail)
    machine = personal_use(facts)
    if machine.status == Status.PASS:
        return passed("dedicated machine", f"{root.detail} (the machine is dedicated to hosting)")
    if root.status == Status.FAIL and machine.status == Status.FAIL:
        return failed("agent root on a personal machine", f"{root.detail}; and this machine is personal: {machine.detail}")
    return unknown(f"{root.detail or 'agent root unknown'}; {machine.detail or 'personal use unknown'}")


@check(
    "AGT-1020",
    title="No agent that fetches and runs code from its platform",
    op="==",
    unit="agents",
    threshold="none",
    why="An agent that downloads its next version and runs it on its own (Vast's update_launcher.sh "
    "fetches install_update.sh and runs it with the account's root; io.net's launcher downloads "
    "the latest release on every run) is a remote root channel: whoever controls the platform's "
    "update server, or its account, runs code here, without any action of the owner.",
    fix="Accept it knowingly: it is how the platform updates its agent. Log what the account runs "
    "(agent_oversight role) and watch the journal; do not host where that trust is too much.",
    fix_role="agent_oversight: agent_oversight_sudo_logging",
    says_agent_has_root=True,
)
def remote_update_channel(facts: dict[str, Any], _threshold: Any) -> Outcome:
    agents, blind = installed_agents(facts)
    channels = []
    for entry in agents:
        agent = _agent(entry)
        if agent is None or not agent.update_channel.remote_code:
            continue
        seen = [p for p in entry.get("update_channel") or [] if isinstance(p, str)]
        where = f" ({', '.join(seen)})" if seen else ""
        channels.append(f"{agent.platform}{where}: {agent.update_channel.text.strip()}")
    if channels:
        return failed(len(channels), " | ".join(channels))
    missed = unseen(blind, agents, lambda a: a.update_channel.remote_code)
    if missed:
        return unknown(_blind_text(missed, blind), 0)
    return passed(0, "no installed agent updates itself from its platform" if agents else "no provider agent installed")


@check(
    "AGT-1030",
    title="No installed provider agent conflicts with this platform's",
    op="==",
    unit="agents",
    threshold="string",
    why="Agents expect the machine, and its Docker daemon or GPUs, to themselves (each policy's "
    "note says how). A second agent beside one that conflicts with it breaks one of them and "
    "rentals fail: this is judged before the second agent is installed.",
    fix="Keep one provider per machine: host this platform on another machine, or uninstall the "
    "other agent first (its own uninstaller); `hostcheck explain agents` says what each takes.",
)
def one_agent(facts: dict[str, Any], threshold: Any) -> Outcome:
    agents, blind = installed_agents(facts)
    catalog = load_catalog()
    if threshold is None:
        judged = [a for a in (_agent(e) for e in agents) if a is not None]
    else:
        agent = catalog.get(str(threshold))
        if agent is None:
            known = ", ".join(a.id for a in catalog.agents)
            return unknown(f"the policy names agent {threshold!r}, which the agent catalog does not know ({known})")
        judged = [agent]
    found: dict[str, list[str]] = {}
    for mine in judged:
        for entry in agents:
            other = _agent(entry)
            if other is None or other.id == mine.id:
                continue
            for conflict in conflicts(mine, other):
                evidence = ", ".join(entry.get("evidence") or []) or "found"
                found.setdefault(other.id, []).append(
                    f"{other.platform} is installed ({evidence}): {conflict.text} "
                    f"(source {conflict.source}; `hostcheck explain {other.id}`)")
    if found:
        params = lookup(facts, "agents.kernel_params")
        details = [text for texts in found.values() for text in dict.fromkeys(texts)]
        if "tensordock" in found and isinstance(params, dict) and params.get("vfio-pci.ids"):
            details.append(f"the GPUs are bound to vfio-pci here (vfio-pci.ids={params['vfio-pci.ids']})")
        return failed(len(found), "conflict: " + "; ".join(details))
    installed = [_platform(e) for e in agents]
    missed = unseen(blind, agents, lambda a: any(conflicts(mine, a) for mine in judged))
    if missed:
        return unknown(_blind_text(missed, blind), 0)
    if threshold is None:
        return passed(0, f"{installed[0]} alone" if installed else "no provider agent installed")
    alone = [p for p in installed if p != judged[0].platform]
    if alone:
        return passed(0, f"installed: {', '.join(installed)}; none conflicts with {judged[0].platform}'s agent")
    return passed(0, f"{judged[0].platform}'s agent alone" if installed else "no provider agent installed")


@check(
    "AGT-1040",
    title="ECC left on by the agent on cards that have it",
    op="==",
    unit="GPUs",
    threshold="none",
    why="io.net's setup turns ECC off (`nvidia-smi --ecc-config=0`) on every card that has it on, "
    "trading silent memory errors in renters' results (and the host's reputation) for a little "
    "VRAM and speed.",
    fix="`sudo nvidia-smi -i N -e 1` and reboot, if the platform allows it; otherwise know that "
    "results on this card are not protected against memory errors.",
)
def ecc_left_on(facts: dict[str, Any], _threshold: Any) -> Outcome:
    agents, blind = installed_agents(facts)
    culprits = [a for a in (_agent(e) for e in agents) if a is not None and a.ecc_off]
    missed = unseen(blind, agents, lambda a: a.ecc_off)
    if not culprits and not missed:
        return passed(0, "no installed agent turns ECC off" if agents else "no provider agent installed")
    off, undecided = [], []
    for device in known_devices(facts):
        if not isinstance(device, dict):
            continue
        ecc = device.get("ecc_enabled", Unknown("not collected"))
        label = f"GPU {device.get('index', '?')} {device.get('name', '')}".strip()
        if ecc is False:
            off.append(label)
        elif isinstance(ecc, Unknown) and NOT_SUPPORTED not in ecc.reason:
            undecided.append(f"{label}: {ecc.reason}")
    if off and not culprits:
        # ECC is off, and the agent that turns it off may be here unseen: not a pass.
        return unknown(f"ECC off on {', '.join(off)}; whether an agent did it: {_blind_text(missed, blind)}")
    who = ", ".join(a.platform for a in culprits)
    if off:
        return failed(len(off), f"ECC off on {', '.join(off)}; {who}'s setup turns it off")
    if undecided:
        return unknown("; ".join(undecided))
    return passed(0, "ECC on, or the cards have none")


@check(
    "AGT-1050",
    title="Automatic security updates kept on a host of this platform",
    op="==",
    threshold="none",
    why="Vast's headless install guide tells the owner to purge unattended-upgrades, disable the "
    "apt-daily timers and mask their services, so that an upgrade cannot move the NVIDIA "
    "libraries under a rental; a host set up that way gets no security fixes unless the owner "
    "patches it by hand.",
    fix="Patch by hand on a schedule, or reinstall unattended-upgrades for the security origin only "
    "and hold the NVIDIA packages (host_baseline role); Vast's own pages disagree on which is right.",
    fix_role="host_baseline: host_baseline_security_updates",
)
def updates_kept(facts: dict[str, Any], _threshold: Any) -> Outcome:
    agents, _ = installed_agents(facts)
    removers = [a for a in (_agent(e) for e in agents) if a is not None and a.unattended_upgrades == "removed"]
    if not removers:
        return passed("not changed", "no installed agent's platform removes automatic updates" if agents
                      else "no provider agent installed")
    state = unattended_upgrades(facts)
    units = lookup(facts, "agents.update_units")
    changed = []
    if isinstance(state, dict) and state.get("installed") is False:
        changed.append("unattended-upgrades is not installed")
    if isinstance(units, dict):
        for unit, unit_state in sorted(units.items()):
            if unit_state == "masked":
                changed.append(f"{unit} is masked")
            elif unit.endswith(".timer") and unit_state == "disabled":
                changed.append(f"{unit} is disabled")
    who = ", ".join(a.platform for a in removers)
    if changed:
        return failed("removed", f"{'; '.join(changed)} ({who}'s host guide has the owner do this)")
    if isinstance(units, Unknown):
        return unknown(f"apt timer states unknown: {units.reason}")
    return passed("kept", "unattended-upgrades installed and the apt-daily timers and services not turned off")


@check(
    "AGT-1060",
    title="What the agent account runs through sudo is recorded",
    op="==",
    threshold="none",
    why="The agent's sudo is the platform's root on this machine. sudo's own I/O log "
    "(log_input/log_output) keeps every command and its output, so the owner can see afterwards "
    "what the platform did; without it only the one-line syslog entries remain, if any.",
    fix="Enable sudo I/O logging for the agent account, with rotation (agent_oversight role), "
    "and read it with `sudo sudoreplay -l user ACCOUNT` or `journalctl SYSLOG_IDENTIFIER=sudo`.",
    fix_role="agent_oversight: agent_oversight_sudo_logging",
)
def sudo_logged(facts: dict[str, Any], _threshold: Any) -> Outcome:
    agents, _ = installed_agents(facts)
    accounts = [a for e in agents for a in e.get("accounts") or [] if isinstance(a, dict)]
    if not accounts:
        return passed("no agent account", "no provider agent account on this machine")
    activity = lookup(facts, "agents.sudo_activity")
    if isinstance(activity, Unknown):
        ran = f"what it ran: unknown ({activity.reason})"
    elif isinstance(activity, dict):
        commands = [c for c in activity.get("commands") or [] if isinstance(c, dict)]
        shown = ", ".join(f"`{c.get('command')}` x{c.get('count')}" + (" refused" if c.get("outcome") == "refused" else "")
                          for c in commands[:5])
        ran = f"{activity.get('entries', 0)} sudo entries since {activity.get('since')}" + (f": {shown}" if shown else "")
    else:
        ran = "what it ran: not collected"
    states = []
    for account in accounts:
        sudo = account.get("sudo")
        if isinstance(sudo, Unknown) or not isinstance(sudo, dict):
            reason = sudo.reason if isinstance(sudo, Unknown) else "not collected"
            return unknown(f"{account.get('name')}: sudo settings unknown ({reason}); {ran}")
        if sudo.get("gaps"):
            # A setting in the part not read could turn the logging on or off.
            return unknown(f"{account.get('name')}: sudo settings not fully read "
                           f"({'; '.join(str(g) for g in sudo['gaps'][:3])}); {ran}")
        if sudo.get("io_logging"):
            states.append((True, f"{account.get('name')}: I/O logged"))
        else:
            syslog = "commands reach the journal through syslog only" if sudo.get("syslog") else "not logged at all"
            states.append((False, f"{account.get('name')}: {syslog}"))
    detail = "; ".join(s for _, s in states) + f"; {ran}"
    if all(ok for ok, _ in states):
        return passed("logged", detail)
    return failed("not logged", detail)


def _restart_line(unit: dict[str, Any]) -> str:
    states = [unit.get(k) for k in ("active_state", "sub_state", "result")]
    shown = "/".join(str(s) for s in states if isinstance(s, str))
    return f"{unit.get('name')} restarted {unit.get('restarts')} times" + (f" ({shown})" if shown else "")


@check(
    "AGT-1070",
    title="The provider agent's service is not restarting over and over",
    op="<",
    unit="restarts",
    threshold="number",
    requirement="the agent's service must not be restarting over and over",
    why="An agent whose service fails and is restarted by systemd again and again keeps the machine "
    "offline on its platform while everything else looks up: the real error is in the service's "
    "journal and the agent's own log (Vast: /var/lib/vastai_kaalia/kaalia.log), not on the screen. "
    "systemd counts the automatic restarts since the service was last started by hand.",
    fix="Read why it fails: `sudo journalctl -u UNIT -n 200 --no-pager` and the agent's own log "
    "(Vast: /var/lib/vastai_kaalia/kaalia.log); fix that (often the GPUs are not seen: `nvidia-smi`), "
    "then `sudo systemctl restart UNIT`, which also sets the count back to 0.",
)
def agent_not_restart_looping(facts: dict[str, Any], threshold: Any) -> Outcome:
    agents, _blind = installed_agents(facts)
    if not agents:
        return passed(0, "no provider agent installed")
    looping: list[str] = []
    undecided: list[str] = []
    counts: list[int] = []
    for entry in agents:
        units = entry.get("units")
        if isinstance(units, Unknown):
            undecided.append(f"{_platform(entry)}: {units.reason}")
            continue
        for unit in units or []:
            if not isinstance(unit, dict):
                continue
            restarts = unit.get("restarts")
            if isinstance(restarts, Unknown):
                undecided.append(restarts.reason)
            elif not isinstance(restarts, int) or isinstance(restarts, bool):
                undecided.append(f"{unit.get('name')}: restart count not collected")
            else:
                counts.append(restarts)
                if restarts >= threshold:
                    looping.append(_restart_line(unit))
    if looping:
        return failed(max(counts), "; ".join(looping))
    if undecided:
        return unknown("; ".join(undecided), max(counts, default=None))
    if not counts:
        return passed(0, "no installed agent runs a systemd service")
    return passed(max(counts), f"at most {max(counts)} automatic restart(s)")
