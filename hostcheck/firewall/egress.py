"""Can a container reach the owner's network? Walk a few probe packets from each container
bridge through every nftables base chain they meet, in the recorded ruleset (ISO-1040).

A packet "from a container" comes in on a container bridge and leaves on some other
interface. It is ``blocked`` when at least one base chain on its hook certainly drops or
rejects it (a drop in any base chain is final), ``reachable`` when every base chain
certainly accepts it, and ``undetermined`` otherwise (a match this walker does not model,
such as an xtables extension or a verdict map, sits on the path). Nothing is guessed: an
undetermined probe makes the check unknown, never a pass.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from hostcheck.facts import Unknown
from hostcheck.firewall.ruleset import Key, Ruleset
from hostcheck.models import EgressVerdict

MAX_STEPS = 20_000


@dataclass(frozen=True)
class Probe:
    name: str
    hook: str  # "forward" (through the host) or "input" (to the host itself)
    daddr: str
    proto: str
    dport: int | None  # None: any port (a rule that matches on the port may or may not apply)


PROBES_V4 = (
    Probe("home router web page (RFC 1918)", "forward", "192.168.1.1", "tcp", 80),
    Probe("LAN device discovery, SSDP (RFC 1918)", "forward", "192.168.1.1", "udp", 1900),
    Probe("private network 10/8 (RFC 1918)", "forward", "10.0.0.1", "tcp", 445),
    Probe("private network 172.16/12 (RFC 1918)", "forward", "172.16.0.1", "tcp", 22),
    Probe("carrier-grade NAT range (RFC 6598)", "forward", "100.64.0.1", "tcp", 80),
    Probe("cloud metadata service (link-local)", "forward", "169.254.169.254", "tcp", 80),
    Probe("multicast (mDNS)", "forward", "224.0.0.251", "udp", 5353),
    # A container's own gateway is the host: what listens there answers containers.
    Probe("this host's own services", "input", "172.17.0.1", "tcp", 8080),
)
PROBES_V6 = (
    Probe("IPv6 unique local address", "forward", "fd00::1", "tcp", 80),
    Probe("IPv6 link-local", "forward", "fe80::1", "tcp", 80),
    Probe("IPv6 multicast (mDNS)", "forward", "ff02::fb", "udp", 5353),
    Probe("this host's own services (IPv6)", "input", "fd00::1", "tcp", 8080),
)
# Where route_localnet=1 on a bridge, a container's packet to 127.0.0.1 is delivered to the
# host's loopback-only services unless an input chain drops it (ISO-1060). Those services
# listen on ports of their own, so the packet's port is left open: a rule accepting some
# ports (SSH, a provider's range) decides nothing for the others, and only a drop that holds
# for every port blocks it.
LOOPBACK_PROBE = Probe("this host's loopback-only services (route_localnet=1)", "input", "127.0.0.1", "tcp", None)
TRANSPORTS = frozenset({"tcp", "udp", "udplite", "sctp", "dccp", "icmp", "icmpv6", "igmp"})
UPLINK = "\x00uplink"
# iptables-nft's `-m comment`: matches every packet (ufw tags its rules with it)
XT_COMMENT = {"type": "match", "name": "comment"}  # the interface a packet leaves by: never equal to a named interface


@dataclass(frozen=True)
class Packet:
    family: int
    iifname: str
    oifname: str
    daddr: ipaddress.IPv4Address | ipaddress.IPv6Address
    proto: str
    dport: int | None
    # Whether the destination is one of the host's own addresses (`fib daddr type local`, as
    # ufw's ufw-not-local chain asks); None: not known.
    daddr_local: bool | None = None


class _Undecidable(Exception):
    """A match the walk does not model. Not in hostcheck.errors: a signal inside this module, caught
    by the walk, which says the probe is undetermined; it never leaves the module."""


def _name_matches(value: str, pattern: Any) -> bool:
    if not isinstance(pattern, str):
        raise _Undecidable
    if pattern.endswith("*") and not pattern.endswith("\\*"):
        return value.startswith(pattern[:-1])
    return value == pattern.replace("\\*", "*")


def _addr_in(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, element: Any) -> bool:
    if isinstance(element, dict) and "elem" in element:
        return _addr_in(addr, element["elem"].get("val") if isinstance(element["elem"], dict) else None)
    try:
        if isinstance(element, str):
            return addr in ipaddress.ip_network(element, strict=False)
        if isinstance(element, dict) and "prefix" in element:
            p = element["prefix"]
            return addr in ipaddress.ip_network(f"{p['addr']}/{p['len']}", strict=False)
        if isinstance(element, dict) and "range" in element:
            low, high = (ipaddress.ip_address(x) for x in element["range"])
            return type(low) is type(addr) and low <= addr <= high  # type: ignore[operator]
    except (ValueError, KeyError, TypeError):
        raise _Undecidable from None
    raise _Undecidable


def _scalar_in(value: Any, element: Any) -> bool:
    if isinstance(element, dict) and "elem" in element:
        return _scalar_in(value, element["elem"].get("val") if isinstance(element["elem"], dict) else None)
    if isinstance(element, dict) and "range" in element:
        low, high = element["range"]
        if isinstance(value, int) and isinstance(low, int) and isinstance(high, int):
            return low <= value <= high
        raise _Undecidable
    if isinstance(value, str) and isinstance(element, str):
        return _name_matches(value, element)
    if isinstance(value, int) and isinstance(element, int):
        return value == element
    if isinstance(value, str) and isinstance(element, int) or isinstance(value, int) and isinstance(element, str):
        return str(value) == str(element)
    raise _Undecidable


class Walker:
    def __init__(self, ruleset: Ruleset, packet: Packet) -> None:
        self.rs = ruleset
        self.p = packet
        self.steps = 0

    # ---- matches --------------------------------------------------------------------------
    def _left(self, left: Any) -> tuple[str, Any]:
        """(kind, value) of the packet field a match reads; _Undecidable when not modelled;
        ("absent", None) when the packet has no such header (the match is false)."""
        p = self.p
        if isinstance(left, dict) and isinstance(left.get("meta"), dict):
            key = left["meta"].get("key")
            if key in ("iifname", "oifname", "iif", "oif"):
                return "name", getattr(p, key if key.endswith("name") else key + "name")
            if key == "l4proto":
                return "scalar", p.proto
            if key == "nfproto":
                return "scalar", "ipv4" if p.family == 4 else "ipv6"
        if isinstance(left, dict) and isinstance(left.get("payload"), dict):
            proto, field = left["payload"].get("protocol"), left["payload"].get("field")
            if proto in ("ip", "ip6"):
                if (proto == "ip") != (p.family == 4):
                    return "absent", None
                if field == "daddr":
                    return "addr", p.daddr
                if field == "protocol" or field == "nexthdr":
                    return "scalar", p.proto
            if proto in TRANSPORTS and proto != p.proto:
                return "absent", None
            if proto in ("tcp", "udp", "th") and field == "dport":
                if p.dport is None:
                    raise _Undecidable
                return "scalar", p.dport
        if isinstance(left, dict) and isinstance(left.get("fib"), dict) and p.daddr_local is not None:
            fib = left["fib"]
            if fib.get("result") == "type" and fib.get("flags") in (["daddr"], "daddr"):
                return "scalar", "local" if p.daddr_local else "unicast"
        if isinstance(left, dict) and isinstance(left.get("ct"), dict):
            key = left["ct"].get("key")
            if key == "state":
                return "flags", {"new"}
            if key == "status":
                return "flags", set()
        raise _Undecidable

    def _elements(self, right: Any) -> list[Any]:
        if isinstance(right, dict) and "set" in right:
            items = right["set"]
            return items if isinstance(items, list) else [items]
        if isinstance(right, str) and right.startswith("@"):
            for family in (self.p_family_names()):
                for key, elems in self.rs.sets.items():
                    if key[2] == right[1:] and key[0] == family:
                        return elems
            raise _Undecidable
        return [right]

    def p_family_names(self) -> tuple[str, ...]:
        return ("inet", "ip" if self.p.family == 4 else "ip6", "bridge", "netdev")

    def _match(self, match: dict[str, Any]) -> bool:
        op = match.get("op", "==")
        kind, value = self._left(match.get("left"))
        if kind == "absent":
            return False
        right = match.get("right")
        if kind == "flags":
            wanted = {str(x) for x in (right if isinstance(right, list) else [right])}
            if op in ("==", "in"):
                return bool(value & wanted)
            if op == "!=":
                return not value & wanted
            raise _Undecidable
        elements = self._elements(right)
        if kind == "addr":
            hit = any(_addr_in(value, e) for e in elements)
        elif kind == "name":
            hit = any(_name_matches(value, e) for e in elements)
        else:
            hit = any(_scalar_in(value, e) for e in elements)
        if op in ("==", "in"):
            return hit
        if op == "!=":
            return not hit
        raise _Undecidable

    def _rule(self, expr: list[Any]) -> tuple[bool | None, Any]:
        """(matches: True/False/None = cannot tell, verdict statement or None)."""
        result: bool | None = True
        verdict: Any = None
        for statement in expr:
            if not isinstance(statement, dict):
                return None, {"unknown": None}
            if "match" in statement:
                try:
                    ok = self._match(statement["match"])
                except _Undecidable:
                    result = None
                    continue
                if not ok:
                    return False, None
            elif set(statement) & {"accept", "drop", "reject", "return", "jump", "goto"}:
                verdict = statement
            elif set(statement) <= {"counter", "log", "comment", "notrack"} or statement.get("xt", {}) == XT_COMMENT:
                continue
            elif set(statement) & {"vmap", "queue"}:
                return None, {"unknown": None}
            else:
                # limit, quota, xt and other extensions: the packet may or may not match
                result = None
        return result, verdict

    # ---- chains ---------------------------------------------------------------------------
    def chain(self, key: Key, depth: int = 0) -> set[str]:
        """Possible outcomes of a chain: "accept", "drop", "return" (fell off or returned)."""
        if depth > 16:
            return {"accept", "drop", "return"}
        return self._from(self.rs.rules.get(key, []), 0, key, depth)

    def _from(self, rules: list[list[Any]], start: int, key: Key, depth: int) -> set[str]:
        for index in range(start, len(rules)):
            self.steps += 1
            if self.steps > MAX_STEPS:
                return {"accept", "drop", "return"}
            matches, verdict = self._rule(rules[index])
            if matches is False or verdict is None:
                continue
            taken = self._verdict(verdict, rules, index, key, depth)
            if matches is True:
                return taken
            return taken | self._from(rules, index + 1, key, depth)
        return {"return"}

    def _verdict(self, verdict: dict[str, Any], rules: list[list[Any]], index: int,
                 key: Key, depth: int) -> set[str]:
        if "accept" in verdict:
            return {"accept"}
        if "drop" in verdict or "reject" in verdict:
            return {"drop"}
        if "return" in verdict:
            return {"return"}
        for kind in ("jump", "goto"):
            if kind in verdict:
                target = verdict[kind].get("target") if isinstance(verdict[kind], dict) else None
                sub = (key[0], key[1], str(target))
                if sub not in self.rs.chains:
                    return {"accept", "drop", "return"}
                outcomes = self.chain(sub, depth + 1)
                if kind == "goto" or "return" not in outcomes:
                    return outcomes
                return (outcomes - {"return"}) | self._from(rules, index + 1, key, depth)
        return {"accept", "drop", "return"}

    def base(self, key: Key) -> set[str]:
        outcomes = self.chain(key)
        if "return" in outcomes:
            policy = self.rs.chains[key].get("policy", "accept")
            outcomes = (outcomes - {"return"}) | {"drop" if policy == "drop" else "accept"}
        return outcomes


def walk(ruleset: Ruleset, probe: Probe, iifname: str) -> dict[str, Any]:
    """The verdict on one probe packet coming in on ``iifname``, with the evidence."""
    daddr = ipaddress.ip_address(probe.daddr)
    packet = Packet(daddr.version, iifname, UPLINK, daddr, probe.proto, probe.dport,
                    daddr_local=True if probe.hook == "input" else None)
    chains = ruleset.base_chains(probe.hook, packet.family)
    verdicts = {}
    for key in chains:
        walker = Walker(ruleset, packet)
        verdicts[key] = walker.base(key)
    port = "any" if probe.dport is None else probe.dport
    result = {"name": probe.name, "destination": f"{probe.daddr} {probe.proto}/{port}",
              "interface": iifname}
    blocking = [k for k, v in verdicts.items() if v == {"drop"}]
    if blocking:
        family, table, name = blocking[0]
        return {**result, "verdict": EgressVerdict.BLOCKED, "evidence": f"dropped in {family} {table} {name}"}
    if all(v == {"accept"} for v in verdicts.values()):
        evidence = (f"accepted by every {probe.hook} chain: " + ", ".join(" ".join(k) for k in chains)
                    if chains else f"no nftables chain filters the {probe.hook} path")
        return {**result, "verdict": EgressVerdict.REACHABLE, "evidence": evidence}
    unsure = [" ".join(k) for k, v in verdicts.items() if v != {"accept"}]
    return {**result, "verdict": EgressVerdict.UNDETERMINED,
            "evidence": f"rules this audit cannot evaluate decide it in: {', '.join(unsure)}"}


def evaluate(ruleset: list[Any], bridges: list[str], bridges_v6: list[str],
             legacy_tables: list[str]) -> dict[str, Any]:
    """Every probe from every container bridge (``docker0`` when there is none yet)."""
    rs = Ruleset(ruleset)
    assumed = not bridges
    interfaces = bridges or ["docker0"]
    probes = []
    for iface in interfaces:
        for probe in PROBES_V4 + (PROBES_V6 if iface in bridges_v6 else ()):
            result = walk(rs, probe, iface)
            if result["verdict"] != EgressVerdict.BLOCKED and legacy_tables:
                result = {**result, "verdict": EgressVerdict.UNDETERMINED,
                          "evidence": result["evidence"] + "; legacy iptables tables also filter "
                          f"({', '.join(legacy_tables)}) and are not read"}
            probes.append(result)
    return {"bridges": bridges, "bridges_assumed": assumed, "probes": probes}


def judge(firewall: Any, egress: dict[str, Any]) -> dict[str, Any] | Unknown:
    """The walk for ``network.container_egress`` and ``network.firewall`` as recorded."""
    for key in ("bridges", "bridges_v6", "legacy_iptables_tables"):
        if isinstance(egress.get(key), Unknown):
            return Unknown(f"network.container_egress.{key}: {egress[key].reason}")
    if isinstance(firewall, Unknown):
        return firewall
    ruleset = firewall.get("nftables") if isinstance(firewall, dict) else None
    if isinstance(ruleset, Unknown):
        return ruleset
    if not isinstance(ruleset, list):
        return Unknown("the nftables ruleset could not be read (nft did not run)")
    bridges = [str(b) for b in egress.get("bridges", []) if isinstance(b, str)]
    v6 = [str(b) for b in egress.get("bridges_v6", []) if isinstance(b, str)]
    legacy = [str(t) for t in egress.get("legacy_iptables_tables", []) if isinstance(t, str)]
    return evaluate(ruleset, bridges, v6, legacy)


def loopback_walk(firewall: Any, bridges: list[str]) -> list[dict[str, Any]] | Unknown:
    """The loopback probe from each of ``bridges`` through the recorded input chains."""
    ruleset = firewall.get("nftables") if isinstance(firewall, dict) else firewall
    if isinstance(ruleset, Unknown):
        return ruleset
    if not isinstance(ruleset, list):
        return Unknown("the nftables ruleset could not be read (nft did not run)")
    rs = Ruleset(ruleset)
    return [walk(rs, LOOPBACK_PROBE, bridge) for bridge in bridges]
