"""The container side of ISO-1040 and ISO-1060: which container bridges exist, which carry
IPv6, whether they route to the host's loopback (route_localnet, theirs and ``all``'s), and
whether legacy iptables tables are loaded (their rules are not in nft's ruleset).

Raw evidence only. The nftables ruleset is recorded once, by the firewall collector
(``network.firewall.nftables``); :mod:`hostcheck.firewall.egress` walks it in the check.
"""

from __future__ import annotations

import os
from typing import Any

from hostcheck.collectors._run import read_text
from hostcheck.facts import Unknown

SECTION = "network"
TIMEOUT = 3.0

NEEDS_ROOT = "reading the firewall ruleset needs root"
SYS_NET = "/sys/class/net"
PROC_CONF = "/proc/sys/net/ipv4/conf"
# Bridges container engines create: Docker's default and user-defined networks, CNI's
# default (containerd, Kubernetes), nerdctl's and podman's defaults.
BRIDGE_PREFIXES = ("docker0", "br-", "cni", "nerdctl", "podman")


def container_bridges(sys_net: str = SYS_NET) -> tuple[list[str], list[str]]:
    """Container bridges on this host, and those of them with a non-link-local IPv6 address."""
    try:
        names = sorted(os.listdir(sys_net))
    except OSError:
        return [], []
    bridges = [n for n in names if n.startswith(BRIDGE_PREFIXES) and os.path.isdir(f"{sys_net}/{n}/bridge")]
    v6: set[str] = set()
    text = read_text("/proc/net/if_inet6")
    if isinstance(text, str):
        for line in text.splitlines():
            parts = line.split()
            # scope 0x20 is link-local
            if len(parts) >= 6 and parts[5] in bridges and parts[3] != "20":
                v6.add(parts[5])
    return bridges, sorted(v6)


def legacy_iptables_tables() -> list[str]:
    tables = []
    for path in ("/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"):
        text = read_text(path)
        if isinstance(text, str):
            tables += [f"{'ip6' if 'ip6' in path else 'ip'} {t}" for t in text.split()]
    return tables


def route_localnet(sys_net: str = SYS_NET, proc_conf: str = PROC_CONF) -> dict[str, int] | Unknown:
    """route_localnet of each container bridge (readable without root). 1 lets packets to
    127.0.0.0/8 arriving on that bridge reach the host's loopback-only services."""
    bridges, _v6 = container_bridges(sys_net)
    out: dict[str, int] = {}
    for bridge in bridges:
        text = read_text(f"{proc_conf}/{bridge}/route_localnet")
        if not isinstance(text, str) or text.strip() not in ("0", "1"):
            return Unknown(f"{proc_conf}/{bridge}/route_localnet could not be read")
        out[bridge] = int(text.strip())
    return out


def route_localnet_all(proc_conf: str = PROC_CONF) -> int | Unknown:
    """net.ipv4.conf.all.route_localnet: the kernel ORs it with each interface's own value, so
    1 here routes loopback-addressed packets from every bridge whatever the bridge's own value
    says. Source: IN_DEV_ROUTE_LOCALNET is IN_DEV_ORCONF(in_dev, ROUTE_LOCALNET), and
    ip_route_input_slow drops a packet to 127/8 as a martian unless IN_DEV_NET_ROUTE_LOCALNET
    (the same OR) holds: https://github.com/torvalds/linux/blob/master/include/linux/inetdevice.h
    and net/ipv4/route.c, read 2026-12-03."""
    text = read_text(f"{proc_conf}/all/route_localnet")
    if not isinstance(text, str) or text.strip() not in ("0", "1"):
        return Unknown(f"{proc_conf}/all/route_localnet could not be read")
    return int(text.strip())


def collect(ctx: Any) -> dict[str, Any]:
    localnet = {"route_localnet": route_localnet(), "route_localnet_all": route_localnet_all()}
    if os.geteuid() != 0:
        return {"container_egress": Unknown(NEEDS_ROOT), **localnet}
    bridges, bridges_v6 = container_bridges()
    return {"container_egress": {"bridges": bridges, "bridges_v6": bridges_v6,
                                 "legacy_iptables_tables": legacy_iptables_tables()},
            **localnet}
