"""This machine's own network view: interfaces, default route, listeners, firewall ruleset.

NAT type, CGNAT and inbound reachability (same section) come from the reachability collector.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any

from hostcheck.collectors._run import read_text, run_command
from hostcheck.collectors.address_source import address_source
from hostcheck.facts import Unknown
from hostcheck.firewall.ruleset import Ruleset, keep_iptables_save, parse_nft_ruleset
from hostcheck.knowledge.netaddr import classify_address, parse_address
from hostcheck.knowledge.routes import interface_ipv4, parse_proc_net_ipv6_route, parse_proc_net_route

SECTION = "network"
TIMEOUT = 3.0

SYS_NET = "/sys/class/net"
FIREWALL_NEEDS_ROOT = "reading the firewall ruleset needs root"


# ---------------------------------------------------------------- interfaces


def interface_kind(name: str, sys_net: str = SYS_NET) -> str:
    base = os.path.join(sys_net, name)
    if name == "lo":
        return "loopback"
    if os.path.isdir(os.path.join(base, "wireless")) or os.path.exists(os.path.join(base, "phy80211")):
        return "wireless"
    device = os.path.join(base, "device")
    if os.path.lexists(device) and "/virtual/" not in os.path.realpath(device):
        return "wired"
    return "virtual"


def _prefixlen(netmask: str | None) -> int | None:
    ip = parse_address(netmask) if netmask else None
    return None if ip is None else bin(int(ip)).count("1")


def collect_interfaces(public_ranges: list[str]) -> list[dict[str, Any]] | Unknown:
    import psutil  # deferred: only the audit needs it
    try:
        addrs = psutil.net_if_addrs()
        stats = psutil.net_if_stats()
    except OSError as exc:
        return Unknown(f"cannot list network interfaces: {exc}")
    result = []
    for name in sorted(addrs):
        mac: str | Unknown = Unknown("no link-layer address")
        addresses = []
        for a in addrs[name]:
            if a.family == psutil.AF_LINK:
                mac = a.address
            elif a.family in (socket.AF_INET, socket.AF_INET6):
                family = 4 if a.family == socket.AF_INET else 6
                address = a.address.split("%", 1)[0]
                addresses.append(
                    {"address": address, "family": family,
                     "prefixlen": _prefixlen(a.netmask),
                     "scope": classify_address(address, public_ranges)}
                )
        st = stats.get(name)
        result.append(
            {"name": name, "kind": interface_kind(name),
             "up": bool(st.isup) if st else Unknown("no interface statistics"),
             "mac": mac, "addresses": addresses}
        )
    return result


# ---------------------------------------------------------------- routes


def default_route() -> dict[str, Any] | None | Unknown:
    v4 = read_text("/proc/net/route")
    v6 = read_text("/proc/net/ipv6_route")
    if isinstance(v4, Unknown) and isinstance(v6, Unknown):
        return Unknown(f"no routing table: {v4.reason}")
    routes = ([] if isinstance(v4, Unknown) else parse_proc_net_route(v4)) or (
        [] if isinstance(v6, Unknown) else parse_proc_net_ipv6_route(v6))
    if not routes:
        return None
    best = routes[0]
    return {"interface": best["interface"], "gateway": best["gateway"],
            "kind": interface_kind(best["interface"]), **link_mode(best["interface"])}


# The kernel's link speeds end at a few hundred Gb/s; anything past this is not a speed.
MAX_LINK_MBPS = 10_000_000
DUPLEX_WORDS = ("full", "half")
SPEED_TEXT = re.compile(r"^-?[0-9]{1,9}$")


def link_mode(name: str, sys_net: str = SYS_NET) -> dict[str, int | str | Unknown]:
    """The negotiated speed (Mb/s) and duplex of an interface, from sysfs. The kernel answers
    EINVAL on a link that is down and on drivers that report none (loopback, tunnels, many
    virtual ones), and -1 or "unknown" when the link has not negotiated."""
    if "/" in name or name in ("", ".", ".."):
        return {"speed_mbps": Unknown(f"not an interface name: {name!r}"),
                "duplex": Unknown(f"not an interface name: {name!r}")}
    base = os.path.join(sys_net, name)
    speed_text = read_text(os.path.join(base, "speed"), limit=64)
    duplex_text = read_text(os.path.join(base, "duplex"), limit=64)
    return {"speed_mbps": parse_link_speed(speed_text, name), "duplex": parse_duplex(duplex_text, name)}


def parse_link_speed(text: str | Unknown, name: str) -> int | Unknown:
    if isinstance(text, Unknown):
        return Unknown(f"{name} reports no link speed (down, or its driver gives none): {text.reason}")
    value = text.strip()
    if not SPEED_TEXT.match(value) or int(value) > MAX_LINK_MBPS:
        return Unknown(f"{name}: link speed {value[:20]!r} is not a number of Mb/s")
    if int(value) <= 0:
        return Unknown(f"{name} has not negotiated a link speed (the kernel says {value})")
    return int(value)


def parse_duplex(text: str | Unknown, name: str) -> str | Unknown:
    if isinstance(text, Unknown):
        return Unknown(f"{name} reports no duplex (down, or its driver gives none): {text.reason}")
    value = text.strip()
    if value in DUPLEX_WORDS:
        return value
    return Unknown(f"{name} has not negotiated duplex (the kernel says {value[:20]!r})")


# ---------------------------------------------------------------- listeners


def exposure(address: str) -> str:
    ip = parse_address(address)
    if ip is None:
        return "specific"
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "all"
    return "specific"


_TCP_LISTEN = "0A"
_UDP_UNCONNECTED = "07"


def parse_proc_net_sockets(
    text: str, proto: str, family: int, skip_inodes: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Listening sockets from /proc/net/{tcp,tcp6,udp,udp6} (TCP LISTEN, unconnected UDP),
    except those whose inode is in ``skip_inodes`` (the audit's own sockets)."""
    found = []
    want = _TCP_LISTEN if proto == "tcp" else _UDP_UNCONNECTED
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 4 or f[3].upper() != want:
            continue
        if len(f) > 9 and f[9] in skip_inodes:
            continue
        local, _, port_hex = f[1].partition(":")
        try:
            port = int(port_hex, 16)
            raw = bytes.fromhex(local)
        except ValueError:
            continue
        if family == 4 and len(raw) == 4:
            address = socket.inet_ntoa(raw[::-1])
        elif family == 6 and len(raw) == 16:
            # Four 32-bit words, each in host byte order.
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
            address = socket.inet_ntop(socket.AF_INET6, words)
        else:
            continue
        if proto == "udp" and f[2].partition(":")[2] not in ("0000", ""):
            continue  # connected UDP socket: a client, not a listener
        found.append({"proto": proto, "address": address, "port": port})
    return found


def own_socket_inodes(fd_dir: str = "/proc/self/fd") -> frozenset[str]:
    """Inodes of this process's sockets (its STUN and probe sockets are not the host's services)."""
    inodes = set()
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return frozenset()
    for name in names:
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            inodes.add(target[8:-1])
    return frozenset(inodes)


def _listeners_from_proc() -> list[dict[str, Any]] | Unknown:
    found: list[dict[str, Any]] = []
    read_any = False
    own = own_socket_inodes()
    for proto in ("tcp", "udp"):
        for family, suffix in ((4, ""), (6, "6")):
            text = read_text(f"/proc/net/{proto}{suffix}")
            if isinstance(text, Unknown):
                continue
            read_any = True
            found.extend(parse_proc_net_sockets(text, proto, family, own))
    if not read_any:
        return Unknown("cannot read /proc/net/tcp or /proc/net/udp")
    why = Unknown("owning process not determined (psutil unavailable)")
    return [{**s, "process": why, "exposure": exposure(s["address"])} for s in found]


def collect_listening() -> list[dict[str, Any]] | Unknown:
    import psutil  # deferred: only the audit needs it
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return _listeners_from_proc()
    root = os.geteuid() == 0
    me = os.getpid()
    names: dict[int, str] = {}
    seen: set[tuple[str, str, int, str]] = set()
    result = []
    for c in conns:
        if not c.laddr:
            continue
        if c.type == socket.SOCK_STREAM:
            if c.status != psutil.CONN_LISTEN:
                continue
            proto = "tcp"
        elif c.type == socket.SOCK_DGRAM:
            if c.raddr:
                continue
            proto = "udp"
        else:
            continue
        if c.pid == me:
            continue  # the audit's own probe sockets (STUN, UPnP) are not the host's services
        process: str | Unknown
        if c.pid is None:
            process = Unknown("no visible process owns this socket (kernel, or another PID namespace)"
                              if root else "socket owner not visible without root")
        else:
            if c.pid not in names:
                try:
                    names[c.pid] = psutil.Process(c.pid).name()
                except psutil.Error:
                    names[c.pid] = ""
            process = names[c.pid] or Unknown(f"process {c.pid} exited")
        address = c.laddr.ip.split("%", 1)[0]
        key = (proto, address, c.laddr.port, process if isinstance(process, str) else "")
        if key in seen:
            continue  # a socket shared by several processes of one service
        seen.add(key)
        result.append({"proto": proto, "address": address, "port": c.laddr.port,
                       "process": process, "exposure": exposure(address)})
    return sorted(result, key=lambda s: (s["proto"], s["port"], s["address"]))


# ---------------------------------------------------------------- firewall


def collect_firewall() -> dict[str, Any] | Unknown:
    """The ruleset as recorded evidence (:mod:`hostcheck.firewall.ruleset`); judged in the checks."""
    if os.geteuid() != 0:
        return Unknown(FIREWALL_NEEDS_ROOT)
    nft = run_command(["nft", "-j", "list", "ruleset"], timeout=1.5)
    nftables: list[dict[str, Any]] | Unknown | None = None
    if not isinstance(nft, Unknown):
        if nft.returncode == 0:
            nftables = parse_nft_ruleset(nft.stdout)
        else:
            nftables = Unknown(f"nft failed: {nft.stderr.strip()[:200]}")
    iptables: dict[str, Any] | Unknown | None = None
    if not (isinstance(nftables, list) and Ruleset(nftables).has_tables):
        # Legacy iptables rules do not show in nft's ruleset.
        ipt = run_command(["iptables-save"], timeout=1.0)
        if not isinstance(ipt, Unknown) and ipt.returncode == 0:
            iptables = keep_iptables_save(ipt.stdout)
    return {"nftables": nftables, "iptables": iptables}


def collect(ctx: Any) -> dict[str, Any]:
    public_ranges = list(getattr(ctx, "public_ranges", []) or [])
    interfaces = collect_interfaces(public_ranges)
    if isinstance(interfaces, Unknown):
        ipv6_global: bool | Unknown = interfaces
    else:
        ipv6_global = any(a["family"] == 6 and a["scope"] == "global"
                          for i in interfaces for a in i["addresses"])
    route = default_route()
    if isinstance(route, dict):
        route.update(address_source(route["interface"], interface_ipv4(interfaces, route["interface"])))
    return {
        "interfaces": interfaces,
        "default_route": route,
        "ipv6_global": ipv6_global,
        "listening": collect_listening(),
        "firewall": collect_firewall(),
    }
