"""Isolation, Docker daemon, SSH, package and owner-risk checks."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import Missing, Outcome, check, compare, failed, need, pass_if, passed, skipped, unknown
from hostcheck.facts import Unknown, lookup

PERSONAL_KINDS = {"browser_profile", "password_store"}


def _credentials(facts: dict[str, Any]) -> list[dict[str, Any]]:
    creds = need(facts, "isolation.credentials")
    return [c for c in creds if isinstance(c, dict)]


def _unreadable_note(facts: dict[str, Any]) -> str:
    homes = lookup(facts, "isolation.unreadable_homes")
    if isinstance(homes, list) and homes:
        return f"; {len(homes)} home(s) could not be read"
    return ""


@check(
    "ISO-1010",
    title="Machine dedicated to hosting",
    op="==",
    threshold="none",
    why="Customers' containers share the kernel, GPU and disks with everything else on the "
    "machine. Vast requires a machine dedicated to hosting ('any personal workload will cause "
    "the self-test to fail'); Salad disqualifies machines running other heavy applications.",
    fix="Use a separate machine (or a separate disk with its own server install) for hosting: "
    "no desktop session, no personal accounts or data.",
    fix_role="isolation: isolation_enabled",
)
def dedicated(facts: dict[str, Any], _threshold: Any) -> Outcome:
    evidence = []
    session = need(facts, "isolation.graphical_session")
    manager = lookup(facts, "isolation.display_manager")
    if session:
        evidence.append("a graphical desktop session is running")
    if isinstance(manager, str) and manager:
        evidence.append(f"display manager {manager}")
    personal = sorted({c.get("user", "?") for c in _credentials(facts) if c.get("kind") in PERSONAL_KINDS})
    if personal:
        evidence.append(f"personal browser/password data for {', '.join(personal)}")
    if evidence:
        return failed("personal use", "; ".join(evidence))
    if isinstance(manager, Unknown):
        return unknown(f"display manager state unknown: {manager.reason}")
    return passed("no desktop, no personal data found" + _unreadable_note(facts))


@check(
    "ISO-1020",
    title="No human account in the docker group",
    op="==",
    unit="accounts",
    threshold="none",
    why="Membership of the docker group is root on the host without a password; a compromised "
    "personal account becomes a compromised host.",
    fix="`sudo gpasswd -d USER docker` for each human account; administer Docker with sudo.",
    fix_role="isolation: isolation_remove_docker_members",
)
def no_docker_humans(facts: dict[str, Any], _threshold: Any) -> Outcome:
    members = set(need(facts, "isolation.docker_group_members"))
    humans = {a.get("name") for a in need(facts, "isolation.human_accounts") if isinstance(a, dict)}
    bad = sorted(members & humans)
    return failed(len(bad), ", ".join(bad)) if bad else passed(0)


@check(
    "ISO-1030",
    title="AppArmor enabled",
    op="==",
    threshold="none",
    why="Docker's default AppArmor profile is one of the layers between a container and the host.",
    fix="Enable AppArmor (Debian/Ubuntu: on by default; `apparmor=1 security=apparmor` on the kernel command line).",
)
def apparmor(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return passed("enabled") if need(facts, "isolation.apparmor_enabled") else failed("disabled")


def _docker_setting(facts: dict[str, Any], key: str, json_key: str, default: Any) -> tuple[Any, str]:
    """A daemon setting: from the running daemon, else daemon.json, else Docker's default."""
    value = lookup(facts, f"docker.{key}")
    if not isinstance(value, Unknown) and value is not None:
        return value, "daemon"
    reason = lookup(facts, "docker.unreachable_reason")
    daemon_json = lookup(facts, "docker.daemon_json")
    if isinstance(daemon_json, dict):
        return daemon_json.get(json_key, default), "daemon.json"
    if reason == "absent":
        return default, "Docker not installed: its default"
    raise Missing(f"docker.{key}", value.reason if isinstance(value, Unknown) else "not reported")


def _docker_flag(key: str, json_key: str, default: bool, want: bool) -> Any:
    def judge(facts: dict[str, Any], _threshold: Any) -> Outcome:
        value, origin = _docker_setting(facts, key, json_key, default)
        return pass_if(bool(value) == want, "on" if value else "off", f"from {origin}")

    return judge


DOCKER_FLAGS = [
    (
        "DOC-1020",
        "Containers cannot gain privileges (no-new-privileges)",
        "no_new_privileges",
        "no-new-privileges",
        False,
        True,
        "Stops setuid binaries inside a customer's container from gaining more privileges.",
        '"no-new-privileges": true in /etc/docker/daemon.json',
        "docker_host_no_new_privileges",
    ),
    (
        "DOC-1030",
        "Containers survive a daemon restart (live-restore)",
        "live_restore",
        "live-restore",
        False,
        True,
        "Without live-restore a Docker upgrade or restart kills every customer's job.",
        '"live-restore": true in /etc/docker/daemon.json',
        "docker_host_live_restore",
    ),
    (
        "DOC-1040",
        "Inter-container traffic off (icc)",
        "icc",
        "icc",
        True,
        False,
        "Containers of different customers on the default bridge can otherwise reach each other.",
        '"icc": false in /etc/docker/daemon.json',
        "docker_host_icc",
    ),
    (
        "DOC-1050",
        "Userland proxy off",
        "userland_proxy",
        "userland-proxy",
        True,
        False,
        "The userland proxy makes published ports reachable on loopback and hides client addresses.",
        '"userland-proxy": false in /etc/docker/daemon.json',
        "docker_host_userland_proxy",
    ),
]

for _id, _title, _key, _json_key, _default, _want, _why, _fix, _var in DOCKER_FLAGS:
    check(
        _id,
        title=_title,
        op="==",
        threshold="none",
        why=_why,
        fix=_fix,
        fix_role=f"docker_host: {_var}",
    )(_docker_flag(_key, _json_key, _default, _want))


@check(
    "DOC-1010",
    title="NVIDIA container runtime configured",
    op="==",
    threshold="none",
    why="Without the NVIDIA runtime (nvidia-container-toolkit) containers cannot see the GPU.",
    fix="Install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`.",
    fix_role="docker_host: docker_host_nvidia_runtime",
)
def nvidia_runtime(facts: dict[str, Any], _threshold: Any) -> Outcome:
    if lookup(facts, "docker.reachable") is not True:
        reason = lookup(facts, "docker.unreachable_reason")
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
)
def userns(facts: dict[str, Any], _threshold: Any) -> Outcome:
    remap, origin = _docker_setting(facts, "userns_remap", "userns-remap", "")
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
    if lookup(facts, "docker.reachable") is not True:
        reason = lookup(facts, "docker.unreachable_reason")
        if reason == "absent":
            return passed(0, "Docker not installed: no published ports")
        return unknown(f"Docker daemon not reachable ({reason}): published ports unknown")
    ports = need(facts, "docker.published_ports")
    exposed = [p for p in ports if p.get("host_ip") not in ("127.0.0.1", "::1")]
    if not exposed:
        return passed(0)
    filtered = need(facts, "network.firewall.docker_user_chain_filters")
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
    reachable = lookup(facts, "docker.reachable")
    reason = lookup(facts, "docker.unreachable_reason")
    if reachable is True:
        return failed("Docker running")
    if reason == "absent":
        return passed("no Docker")
    if isinstance(reachable, Unknown):
        return unknown(reachable.reason)
    return failed(f"Docker installed ({reason})")


SAFE_ROOT_LOGIN = {"no", "prohibit-password", "without-password", "forced-commands-only"}


def _ssh_setting(facts: dict[str, Any], key: str) -> str | None:
    """The effective sshd value, or None when no sshd is installed (nothing to harden)."""
    if lookup(facts, "ssh.installed") is False:
        return None
    settings = need(facts, "ssh.settings")
    value = settings.get(key)
    if isinstance(value, Unknown) or value is None:
        raise Missing(f"ssh.settings.{key}", "not in the effective configuration")
    return str(value).lower()


def _ssh_rule(key: str, good: set[str]) -> Any:
    def judge(facts: dict[str, Any], _threshold: Any) -> Outcome:
        value = _ssh_setting(facts, key)
        if value is None:
            return passed("no sshd installed")
        source = lookup(facts, "ssh.source")
        origin = f"effective value from {source}" if isinstance(source, str) else ""
        return pass_if(value in good, value, origin)

    return judge


SSH_RULES = [
    ("SSH-1010", "SSH password login off", "passwordauthentication", {"no"},
     "Password logins are brute-forced within hours of a host appearing in a public listing.",
     "`PasswordAuthentication no` in a drop-in that sshd reads first (sshd keeps the first value; "
     "cloud-init's 50-cloud-init.conf can re-enable it)", "ssh_hardening: ssh_hardening_enabled"),
    ("SSH-1020", "No root login with a password", "permitrootlogin", SAFE_ROOT_LOGIN,
     "Root with a password is the first account every scanner tries.",
     "`PermitRootLogin prohibit-password` (or `no`)", "ssh_hardening: ssh_hardening_permit_root_login"),
    ("SSH-1030", "No empty SSH passwords", "permitemptypasswords", {"no"},
     "An account without a password would be open to anyone.",
     "`PermitEmptyPasswords no`", "ssh_hardening: ssh_hardening_enabled"),
    ("SSH-1040", "SSH keyboard-interactive login off", "kbdinteractiveauthentication", {"no"},
     "Keyboard-interactive is password login by another name when PAM asks for a password.",
     "`KbdInteractiveAuthentication no`", "ssh_hardening: ssh_hardening_enabled"),
]

for _id, _title, _key, _good, _why, _fix, _role in SSH_RULES:
    check(_id, title=_title, op="in", threshold="none", why=_why, fix=_fix, fix_role=_role)(_ssh_rule(_key, _good))


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
)
def security_updates(facts: dict[str, Any], _threshold: Any) -> Outcome:
    state = need(facts, "packages.unattended_upgrades")
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
    "OWN-1010",
    title="No personal credentials on the host",
    op="==",
    unit="items",
    threshold="none",
    why="A container escape reads whatever the host can: SSH keys, cloud credentials, browser "
    "profiles and password stores would give a stranger your other machines and accounts.",
    fix="Host on a machine (or a fresh install) that holds none of your personal credentials; "
    "move them off this one.",
    fix_role="isolation: isolation_enabled",
)
def no_credentials(facts: dict[str, Any], _threshold: Any) -> Outcome:
    creds = _credentials(facts)
    if creds:
        kinds = sorted({f"{c.get('kind')} ({c.get('user')})" for c in creds})
        return failed(len(creds), ", ".join(kinds))
    homes = lookup(facts, "isolation.unreadable_homes")
    if isinstance(homes, list) and homes:
        return unknown(f"could not read {len(homes)} home(s): run as root to check them", 0)
    return passed(0)


@check(
    "OWN-1020",
    title="Personal data encrypted at rest",
    op="==",
    threshold="none",
    why="A host others rent is a host others may touch (repairs, theft, a colocation space); "
    "unencrypted personal data on it is readable by whoever holds the disk.",
    fix="Keep personal data off the host; or use full-disk encryption (LUKS) for root and home.",
)
def personal_data_encrypted(facts: dict[str, Any], _threshold: Any) -> Outcome:
    personal = _credentials(facts)
    if not personal:
        return passed("no personal data found")
    home = lookup(facts, "storage.home.encrypted")
    root = lookup(facts, "storage.root.encrypted")
    value = home if not isinstance(home, Unknown) and home is not None else root
    if isinstance(value, Unknown) or value is None:
        return unknown("encryption of the home filesystem unknown")
    return passed("encrypted") if value else failed("unencrypted", f"{len(personal)} personal item(s) on it")


@check(
    "OWN-1030",
    title="Swap encrypted or absent",
    op="==",
    threshold="none",
    why="Memory of the owner's programs and of customers' jobs is written to swap in the clear.",
    fix="Use an encrypted swap (cryptswap) or none.",
)
def swap_encrypted(facts: dict[str, Any], _threshold: Any) -> Outcome:
    swaps = need(facts, "storage.swap")
    if not swaps:
        return passed("no swap")
    clear = [s.get("device") for s in swaps if s.get("encrypted") is False]
    undecided = [s.get("device") for s in swaps if not isinstance(s.get("encrypted"), bool)]
    if clear:
        return failed("unencrypted", ", ".join(map(str, clear)))
    if undecided:
        return unknown(f"encryption of swap {', '.join(map(str, undecided))} unknown")
    return passed("encrypted")


def _as_int(threshold: Any) -> int:
    return int(threshold) if isinstance(threshold, (int, float)) else 0


@check(
    "OWN-1040",
    title="Services exposed to the network (besides SSH)",
    op="<=",
    unit="sockets",
    threshold="number",
    why="Every service listening beyond loopback is reachable by the containers you host and, "
    "with port forwarding, by the internet.",
    fix="Bind local services to 127.0.0.1, remove what you do not need, and keep the firewall on.",
    fix_role="firewall: firewall_enabled",
)
def exposed_services(facts: dict[str, Any], threshold: Any) -> Outcome:
    listening = need(facts, "network.listening")
    ssh_ports = {"22"}
    settings = lookup(facts, "ssh.settings")
    if isinstance(settings, dict) and settings.get("port") is not None:
        port = settings["port"]
        ssh_ports = {str(p) for p in (port if isinstance(port, list) else [port])}
    exposed = sorted(
        {
            f"{s.get('port')}/{s.get('proto')}" + (f" ({s['process']})" if isinstance(s.get("process"), str) else "")
            for s in listening
            if s.get("exposure") != "loopback" and str(s.get("port")) not in ssh_ports
        }
    )
    return compare(len(exposed), "<=", _as_int(threshold), ", ".join(exposed[:8]))


@check(
    "ISO-1040",
    title="Containers cannot reach the owner's network",
    op="==",
    unit="destinations",
    threshold="none",
    why="A renter's container that reaches private addresses can scan and attack the home "
    "router's admin page, the NAS, printers, cameras, other computers and cloud metadata "
    "services, and the host's own services. Docker forwards container traffic to every "
    "destination the host can reach unless a firewall says otherwise.",
    fix="Reject new connections from container bridges (docker0, br-*) to RFC 1918, 100.64.0.0/10, "
    "169.254.0.0/16, multicast, IPv6 ULA/link-local and the host's own subnets and addresses, "
    "in an nftables forward chain (and input for the host itself), keeping DNS to the host's resolvers.",
    fix_role="firewall: firewall_container_egress_isolation",
)
def container_egress(facts: dict[str, Any], _threshold: Any) -> Outcome:
    egress = need(facts, "network.container_egress")
    probes = [p for p in egress.get("probes", []) if isinstance(p, dict)]
    if not probes:
        return unknown("no probe could be evaluated")
    where = "" if not egress.get("bridges_assumed") else " (no container bridge yet: judged for docker0)"

    def line(p: dict[str, Any]) -> str:
        return f"{p.get('name')} {p.get('destination')} via {p.get('interface')}: {p.get('evidence')}"

    reachable = [p for p in probes if p.get("verdict") == "reachable"]
    if reachable:
        return failed(len(reachable), "reachable: " + "; ".join(line(p) for p in reachable) + where)
    undetermined = [p for p in probes if p.get("verdict") != "blocked"]
    if undetermined:
        return unknown("cannot tell: " + "; ".join(line(p) for p in undetermined) + where, len(undetermined))
    evidence = sorted({str(p.get("evidence")) for p in probes})
    return passed(0, f"{len(probes)} private destinations blocked ({'; '.join(evidence)}){where}")


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
)
def security_source(facts: dict[str, Any], _threshold: Any) -> Outcome:
    state = need(facts, "packages.unattended_upgrades")
    if not (isinstance(state, dict) and state.get("installed") and state.get("enabled") is True):
        return skipped("automatic updates are off (PKG-1010)")
    apt = need(facts, "packages.apt_sources")
    security = apt.get("security", [])
    if security:
        return passed("present", ", ".join(sorted({f"{s['uri']} {s['suite']}" for s in security})))
    return failed("absent", f"{len(apt.get('sources', []))} APT source(s), none of them a security suite")
