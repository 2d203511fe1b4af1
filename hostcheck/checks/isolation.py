"""Isolation and owner-risk checks (ISO-*, OWN-*): who and what shares the host with the renters."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import CheckResult, Outcome, check, compare, failed, family, need, passed, state_of, unknown
from hostcheck.checks.readers import credentials as _credentials
from hostcheck.checks.readers import (
    docker_reachability,
    known_containers,
    listening_sockets,
    personal_use,
    recorded_firewall,
    ssh_ports,
)
from hostcheck.checks.readers import unreadable_homes as _unreadable_homes
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.firewall.egress import judge as egress_walk
from hostcheck.firewall.egress import loopback_walk
from hostcheck.knowledge.sudoers.includes import Loaded
from hostcheck.knowledge.sudoers.recorded import account_grants, replayed
from hostcheck.models import EgressVerdict
from hostcheck.wording import counted

ISO = family("ISO", "Isolation", order=50)
OWN = family("OWN", "Owner risk", order=100)

_CLOUD_ACCOUNTS = "isolation.cloud_accounts"

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
    dedicated_only=True,
)
def dedicated(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return personal_use(facts)


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
    shown=state_of("AppArmor"),
    requirement="AppArmor must be enabled",
)
def apparmor(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return passed("enabled") if need(facts, "isolation.apparmor_enabled") else failed("disabled")


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
    dedicated_only=True,
)
def no_credentials(facts: dict[str, Any], _threshold: Any) -> Outcome:
    creds = _credentials(facts)
    if creds:
        kinds = sorted({f"{c.get('kind')} ({c.get('user')})" for c in creds})
        return failed(len(creds), ", ".join(kinds))
    homes = _unreadable_homes(facts)
    if homes:
        return unknown(f"could not read {homes} home(s): run as root to check them", 0)
    return passed(0)


@check(
    "OWN-1020",
    title="Personal data encrypted at rest",
    op="==",
    threshold="none",
    why="A host others rent is a host others may touch (repairs, theft, a colocation space); "
    "unencrypted personal data on it is readable by whoever holds the disk.",
    fix="Keep personal data off the host; or use full-disk encryption (LUKS) for root and home.",
    shown=state_of("personal data"),
)
def personal_data_encrypted(facts: dict[str, Any], _threshold: Any) -> Outcome:
    personal = _credentials(facts)
    if not personal:
        return passed("no personal data")
    home = lookup(facts, "storage.home.encrypted")
    root = lookup(facts, "storage.root.encrypted")
    value = home if not isinstance(home, Unknown) and home is not None else root
    if isinstance(value, Unknown) or value is None:
        return unknown("encryption of the home filesystem unknown")
    return passed("encrypted") if value else failed("unencrypted", f"{counted(len(personal), 'personal item')} on it")


@check(
    "OWN-1030",
    title="Swap encrypted or absent",
    op="==",
    threshold="none",
    why="Memory of the owner's programs and of customers' jobs is written to swap in the clear.",
    fix="Use an encrypted swap (cryptswap) or none.",
    shown=state_of("swap"),
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
def exposed_services(facts: dict[str, Any], threshold: Any) -> CheckResult:
    listening = listening_sockets(facts)
    sshd = ssh_ports(facts)
    exposed = sorted(
        {
            f"{s.get('port')}/{s.get('proto')}" + (f" ({s['process']})" if isinstance(s.get("process"), str) else "")
            for s in listening
            # sshd's own sockets are SSH-1xxx's to judge, whether or not its settings were read
            if s.get("exposure") != "loopback" and str(s.get("port")) not in sshd and s.get("process") != "sshd"
        }
    )
    return compare(len(exposed), _as_int(threshold), ", ".join(exposed[:8]))


@check(
    "ISO-1070",
    title="No passwordless root for a default cloud account",
    op="==",
    threshold="none",
    why="Cloud images give their first account (ubuntu, debian, admin, ec2-user, ...) sudo without a "
    "password: whoever gets that account's shell (a stolen key, an escape from a container into it) is "
    "root at once, and its name is the first one scanners try.",
    fix="Give the account a password and remove its NOPASSWD rule (cloud-init writes it to "
    "/etc/sudoers.d/90-cloud-init-users; check with `sudo visudo -c`), or delete the account if nobody uses it. "
    "The profile removes cloud-init's file when told (isolation_remove_cloud_sudo_rules: true), unless it names "
    "the account the run connects as.",
)
def cloud_account_sudo(facts: dict[str, Any], _threshold: Any) -> Outcome:
    accounts = [a for a in need(facts, _CLOUD_ACCOUNTS) if isinstance(a, dict)]
    if not accounts:
        return passed("no default cloud account")
    loaded = replayed(need(facts, "isolation.sudoers"))
    judged = [(str(a.get("name")), _cloud_grants(loaded, a)) for a in accounts]
    root = [(name, rules) for name, (scope, rules) in judged if scope == "unrestricted" and rules]
    if root:
        return failed("; ".join(f"{name}: NOPASSWD ({', '.join(rules)})" for name, rules in root))
    unsure = [name for name, (scope, _) in judged if scope == "unknown"]
    if unsure:
        return unknown(f"part of sudoers could not be read for {', '.join(unsure)}")
    return passed(f"none for {', '.join(name for name, _ in judged)}")


def _cloud_grants(loaded: Loaded | Unknown, account: dict[str, Any]) -> tuple[str, list[str]]:
    """(sudo scope, FILE:LINE of each rule that applies without a password) for one cloud
    account; :class:`Missing` when they cannot be worked out."""
    grants = account_grants(loaded, account)
    if isinstance(grants, Unknown):
        # Named as the accounts' grants: what the audit has always said when sudoers is root-only.
        raise Missing(_CLOUD_ACCOUNTS, grants.reason)
    return str(grants["scope"]), [f"{r['file']}:{r['line']}" for r in grants["rules"] if r["nopasswd"]]


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
    recorded = need(facts, "network.container_egress")
    egress = egress_walk(recorded_firewall(facts), recorded)
    if isinstance(egress, Unknown):
        raise Missing("network.firewall.nftables", egress.reason)
    probes = [p for p in egress.get("probes", []) if isinstance(p, dict)]
    if not probes:
        return unknown("no probe could be evaluated")
    where = "" if not egress.get("bridges_assumed") else " (no container bridge yet: judged for docker0)"

    def line(p: dict[str, Any]) -> str:
        return f"{p.get('name')} {p.get('destination')} via {p.get('interface')}: {p.get('evidence')}"

    reachable = [p for p in probes if p.get("verdict") == EgressVerdict.REACHABLE]
    if reachable:
        return failed(len(reachable), "reachable: " + "; ".join(line(p) for p in reachable) + where)
    undetermined = [p for p in probes if p.get("verdict") != EgressVerdict.BLOCKED]
    if undetermined:
        return unknown("cannot tell: " + "; ".join(line(p) for p in undetermined) + where, len(undetermined))
    evidence = sorted({str(p.get("evidence")) for p in probes})
    return passed(0, f"{len(probes)} private destinations blocked ({'; '.join(evidence)}){where}")


def _host_network(container: dict[str, Any]) -> bool | Unknown:
    """On the host's network: its own mode is "host", or it joins (``container:X``) one that
    is, as the collector resolved it. Facts recorded before host_network was collected have
    the mode alone: a joined container's network cannot be told from them."""
    mode = container.get("network_mode")
    joined = container.get("host_network", Unknown("host_network not collected"))
    if mode == "host" or joined is True:
        return True
    if isinstance(mode, str) and mode.startswith("container:") and joined is not False:
        return joined if isinstance(joined, Unknown) else Unknown(f"host_network is {joined!r}")
    return False


def _host_access(container: dict[str, Any]) -> tuple[list[str], str | None]:
    """What of the host a container shares, in words (empty: none of the risky settings), and
    why whether it is on the host network could not be told (None when it could)."""
    what = []
    network = _host_network(container)
    mode = str(container.get("network_mode"))
    if network is True:
        what.append("host network" if mode == "host" else f"host network (through {mode[:22]})")
    if container.get("privileged") is True:
        what.append("privileged")
    if container.get("pid_mode") == "host":
        what.append("host PID namespace")
    if container.get("ipc_mode") == "host":
        what.append("host IPC namespace")
    for path in container.get("host_mounts") or []:
        what.append("host root mounted" if path == "/" else f"{path} mounted")
    return what, network.reason if isinstance(network, Unknown) else None


@check(
    "ISO-1050",
    title="No running container shares the host's network, namespaces or control",
    op="==",
    unit="containers",
    threshold="none",
    why="A container on the host network is outside every container firewall rule: it reaches "
    "the owner's LAN, router and cloud metadata directly and can listen on the host's ports. A "
    "privileged container, one sharing the host's PID or IPC namespace, or one given the Docker "
    "socket (or /run, which holds it), the host's root filesystem, its /proc, /sys, /dev, /etc or "
    "home directories, or Docker's data root controls the host: Docker's documentation calls "
    "access to the daemon root-equivalent.",
    fix="Run workloads on a bridge network (not --network host, nor the network of a container "
    "that uses it) without --privileged, --pid host, --ipc host, and without bind mounts of /, "
    "/proc, /sys, /dev, /etc, /root, /home, /run or /var/run (docker.sock), or Docker's data root; "
    "stop the containers listed.",
)
def container_host_access(facts: dict[str, Any], _threshold: Any) -> Outcome:
    reachable, reason = docker_reachability(facts)
    if reachable is not True:
        if reason == "absent":
            return passed(0, "Docker not installed: no containers")
        why = reason.reason if isinstance(reason, Unknown) else reason
        return unknown(f"Docker daemon not reachable ({why}): running containers unknown")
    containers = known_containers(facts)
    judged = [(str(c.get("name", "?")), *_host_access(c)) for c in containers if isinstance(c, dict)]
    risky = [(name, what) for name, what, _why in judged if what]
    unsure = [f"{name}: whether on the host network ({why})" for name, _what, why in judged if why]
    if risky:
        also = f"; cannot tell for {'; '.join(unsure)}" if unsure else ""
        return failed(len(risky), "; ".join(f"{name}: {', '.join(what)}" for name, what in risky) + also)
    if unsure:
        return unknown("; ".join(unsure), len(unsure))
    return passed(0, f"{counted(len(containers), 'running container')}, none with host-level access")


def _routing_loopback(localnet: dict[str, Any], every: Any) -> dict[str, str]:
    """Each bridge that may route loopback-addressed packets, with why in words.
    The kernel routes them when the bridge's own route_localnet or net.ipv4.conf.all's is 1
    (IN_DEV_ROUTE_LOCALNET is an OR of the two)."""
    every_known = every in (0, 1) and not isinstance(every, bool)
    out: dict[str, str] = {}
    for bridge, value in sorted(localnet.items()):
        if value == 1:
            out[str(bridge)] = f"route_localnet=1 on {bridge}"
        elif every_known and every == 1:
            out[str(bridge)] = f"route_localnet=1 on {bridge} (from net.ipv4.conf.all)"
        elif not every_known:
            reason = every.reason if isinstance(every, Unknown) else f"not 0 or 1: {every!r}"
            out[str(bridge)] = f"route_localnet={value} on {bridge}, net.ipv4.conf.all unknown ({reason})"
    return out


@check(
    "ISO-1060",
    title="Containers cannot reach the host's loopback-only services",
    op="==",
    unit="bridges",
    threshold="none",
    why="With route_localnet=1 on a container bridge (dockerd sets it when userland-proxy is "
    "off), or on net.ipv4.conf.all (which the kernel ORs with every interface's own value), the "
    "kernel delivers a container's packets to 127.0.0.1: databases, admin pages and "
    "agents that listen only on the host's loopback, believing themselves private, answer "
    "renters' containers unless an input firewall rule drops that traffic.",
    fix="Drop packets to 127.0.0.0/8 arriving on container bridges in an nftables input chain "
    "(`iifname { docker0, br-* } ip daddr 127.0.0.0/8 drop`), or run Docker with "
    '"userland-proxy": true and set route_localnet back to 0 on each bridge and on all.',
    fix_role="firewall: firewall_container_interfaces",
)
def container_loopback(facts: dict[str, Any], _threshold: Any) -> Outcome:
    localnet = need(facts, "network.route_localnet")
    if not isinstance(localnet, dict):
        return unknown("network.route_localnet is not a mapping")
    if not localnet:
        return passed(0, "no container bridge")
    every = lookup(facts, "network.route_localnet_all")
    routing = _routing_loopback(localnet, every)
    if not routing:
        return passed(0, f"route_localnet=0 on {', '.join(sorted(map(str, localnet)))} and on all")
    # Certain where the bridge's own value or all's is 1; a bridge at 0 with all unknown may
    # or may not route, so reaching it makes the check unknown, not failed.
    all_on = every == 1 and not isinstance(every, bool)
    certain = {str(b) for b, v in localnet.items() if v == 1} | (set(routing) if all_on else set())
    walked = loopback_walk(recorded_firewall(facts), sorted(routing))
    if isinstance(walked, Unknown):
        return unknown(f"{'; '.join(routing.values())}; whether a firewall drops it: {walked.reason}")
    lines = {p["interface"]: f"{routing[p['interface']]}: {p['evidence']}" for p in walked}
    open_ = [p["interface"] for p in walked if p.get("verdict") == EgressVerdict.REACHABLE and p["interface"] in certain]
    unsure = [p["interface"] for p in walked if p.get("verdict") != EgressVerdict.BLOCKED and p["interface"] not in open_]
    if open_:
        also = f"; cannot tell: {'; '.join(lines[b] for b in unsure)}" if unsure else ""
        return failed(len(open_), "; ".join(lines[b] for b in open_) + also)
    if unsure:
        return unknown("; ".join(lines[b] for b in unsure), len(unsure))
    legacy = lookup(facts, "network.container_egress.legacy_iptables_tables")
    note = (f"; legacy iptables tables ({', '.join(legacy)}) not read, nftables already drops it"
            if isinstance(legacy, list) and legacy else "")
    evidence = sorted({str(p["evidence"]) for p in walked})
    return passed(0, "; ".join(routing.values()) + " but " + "; ".join(evidence) + note)
