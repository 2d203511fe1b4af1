"""Which firewall decides: each port the host profile's table opens, walked through ufw's own
rules (ufw-user-input, where `ufw allow` puts them), so that one ufw still drops is found as
such (NET-1080). ufw's fixed chains around them (established, ICMP, DHCP, broadcast) are left
out: iptables-nft loads their conntrack and addrtype matches as xtables extensions, which no
walk of nft's JSON can evaluate."""

from __future__ import annotations

import ipaddress
from typing import Any

from hostcheck.firewall.egress import UPLINK, Packet, Walker
from hostcheck.firewall.ruleset import Key, Ruleset
from hostcheck.models import UfwPortVerdict

PROFILE_INPUT: Key = ("inet", "hostcheck", "input")
UFW_INPUT: Key = ("ip", "filter", "INPUT")
UFW_USER_INPUT: Key = ("ip", "filter", "ufw-user-input")
# A destination on the host itself, from the internet (a documentation address: no rule names it).
HOST_ADDRESS = ipaddress.IPv4Address("192.0.2.10")
SOURCE_MATCHES = frozenset({"saddr", "iifname", "iif"})  # open to some sources only


def has_ufw(rs: Ruleset) -> bool:
    """ufw is running: its ufw-user-input chain is loaded (the test ufw-init itself makes;
    `ufw disable` deletes it)."""
    return UFW_USER_INPUT in rs.chains


def _ports(right: Any) -> list[int] | None:
    items = right["set"] if isinstance(right, dict) and "set" in right else [right]
    ports: list[int] = []
    for item in items if isinstance(items, list) else [items]:
        if isinstance(item, int):
            ports.append(item)
        elif isinstance(item, dict) and isinstance(item.get("range"), list) and len(item["range"]) == 2:
            ports.extend(p for p in item["range"] if isinstance(p, int))  # both ends of a range
        else:
            return None
    return ports


def _opened_by(expr: list[Any]) -> list[tuple[str, int]]:
    """(protocol, port) a rule of the profile's input chain accepts from anyone."""
    if not any(isinstance(s, dict) and "accept" in s for s in expr):
        return []
    protocols: list[str] = []
    ports: list[int] = []
    for statement in expr:
        match = statement.get("match") if isinstance(statement, dict) else None
        if not isinstance(match, dict):
            continue
        left = match.get("left")
        payload = left.get("payload") if isinstance(left, dict) else None
        meta = left.get("meta") if isinstance(left, dict) else None
        if isinstance(payload, dict) and payload.get("field") == "dport":
            found = _ports(match.get("right"))
            if found is None:
                return []
            ports = found
            if payload.get("protocol") in ("tcp", "udp"):
                protocols = [payload["protocol"]]
        elif isinstance(meta, dict) and meta.get("key") == "l4proto":
            right = match.get("right")
            names = right["set"] if isinstance(right, dict) and "set" in right else [right]
            protocols = [n for n in names if n in ("tcp", "udp")]
        elif isinstance(payload, dict) and payload.get("field") in SOURCE_MATCHES or \
                isinstance(meta, dict) and meta.get("key") in SOURCE_MATCHES:
            return []  # open to some sources only (SSH from the admin range)
    return [(proto, port) for proto in protocols for port in ports]


def opened_ports(rs: Ruleset) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for expr in rs.rules.get(PROFILE_INPUT, []):
        found.extend(p for p in _opened_by(expr) if p not in found)
    return found


def judge(items: list[Any]) -> dict[str, Any]:
    """``profile`` and ``ufw``: whether each firewall is loaded; ``ports``: each port the
    profile's table opens to everyone, with ``ufw``: "allows" (a rule of ufw-user-input, where
    `ufw allow` puts them, accepts it), "drops" (none does, and ufw's INPUT policy is drop) or
    "undetermined" (rules this audit cannot evaluate decide)."""
    rs = Ruleset(items)
    result: dict[str, Any] = {"profile": PROFILE_INPUT in rs.chains, "ufw": has_ufw(rs), "ports": []}
    policy = rs.chains.get(UFW_INPUT, {}).get("policy")
    for proto, port in opened_ports(rs):
        packet = Packet(4, UPLINK, UPLINK, HOST_ADDRESS, proto, port, daddr_local=True)
        outcomes = Walker(rs, packet).chain(UFW_USER_INPUT)
        if outcomes == {"accept"} or outcomes == {"return"} and policy == "accept":
            verdict = UfwPortVerdict.ALLOWS
        elif outcomes == {"return"} and policy == "drop":
            verdict = UfwPortVerdict.DROPS
        else:
            verdict = UfwPortVerdict.UNDETERMINED
        result["ports"].append({"port": f"{port}/{proto}", "ufw": verdict})
    return result
