"""Network checks as a table: facts in, exact outcome out, including every way a fact can be
unknown (never a pass). The firewall and NAT cases use the raw evidence the collectors keep
(``network.firewall``, ``network.path``), judged with today's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.facts import Unknown
from hostcheck.firewall.ruleset import parse_nft_ruleset
from hostcheck.judge import run_check

REGISTRY = load_registry()
LAB = ["198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"]
OFFLINE = Unknown("not probed: --offline")


def path(**over: Any) -> dict[str, Any]:
    """Raw evidence of a host behind one home router whose WAN address nobody reported."""
    base: dict[str, Any] = {
        "public_ranges": LAB,
        "local_ipv4": "192.168.1.10",
        "local_ipv4_reason": None,
        "local_ipv6": None,
        "ipv6_failure": "no global IPv6 address (source fe80::1)",
        "stun": [
            {"server": "a:3478", "local": "192.168.1.10:5000", "mapped": "198.51.100.2:5000", "other_address": "203.0.113.11:3479", "error": None},
            {"server": "b:3478", "local": "192.168.1.10:5000", "mapped": "198.51.100.2:5000", "other_address": None, "error": None},
        ],
        "stun_failure": None,
        "stun_ipv6": None,
        "hops": [{"ttl": 1, "address": "192.168.1.1", "reached": False}],
        "router_upnp": Unknown("UPnP: no UPnP device answered discovery"),
        "router_natpmp": Unknown("NAT-PMP: no answer from 192.168.1.1:5351 within 1s"),
    }
    base.update(over)
    return {"network": {"path": base}}


def hops(*addresses: str) -> list[dict[str, Any]]:
    return [{"ttl": i, "address": a, "reached": False} for i, a in enumerate(addresses, 1)]


def router(address: str | None) -> dict[str, Any]:
    return {"address": address, "detail": "UPnP IGD GetExternalIPAddress"}


NO_NAT = [{"server": "a:3478", "local": "198.51.100.9:5000", "mapped": "198.51.100.9:5000", "other_address": None, "error": None}]


def inbound(peer: str | None, results: dict[tuple[int, str], str], gpus: int = 1) -> dict[str, Any]:
    ports = [{"port": p, "proto": proto, "result": r} for (p, proto), r in results.items()]
    return {
        "network": {"inbound": {"probed": True, "peer": peer, "ports": ports, "reason": None}},
        "gpu": {"devices": [{"index": i} for i in range(gpus)]},
    }


def both(port: int, result: str = "reachable") -> dict[tuple[int, str], str]:
    return {(port, "tcp"): result, (port, "udp"): result}


THREE = {**both(40000), **both(40001), **both(40002)}


def ranged(first: int, last: int, results: dict[tuple[int, str], str], *, seen_from: str = "outside",
           peer: str = "198.51.100.2", gpus: int = 1, source: str = "agent") -> dict[str, Any]:
    """A probe of the configured range ``first``-``last`` (and the GPUs it serves)."""
    facts = inbound(peer, results, gpus)
    facts["network"]["inbound"]["seen_from"] = seen_from
    facts["network"]["port_range"] = {"first": first, "last": last, "count": last - first + 1, "source": source}
    return facts


# A range of 200 ports sampled at its first, last and two middle ports; the router forwards
# only 40000-40099 (the upper half was lost), and in TCP_ONLY no UDP at all.
SAMPLE = (40000, 40066, 40133, 40199)
SHRUNK = {k: v for p in SAMPLE for k, v in both(p, "reachable" if p <= 40099 else "unreachable").items()}
TCP_ONLY = {(p, proto): "reachable" if proto == "tcp" else "unreachable" for p in SAMPLE for proto in ("tcp", "udp")}
WHOLE = {k: v for p in SAMPLE for k, v in both(p).items()}


def nft_input(policy: str) -> dict[str, Any]:
    """The recorded ruleset of one nftables table whose input chain has ``policy``."""
    return {"network": {"firewall": {"iptables": None, "nftables": [
        {"table": {"family": "inet", "name": "filter"}},
        {"chain": {"family": "inet", "table": "filter", "name": "input", "type": "filter", "hook": "input", "prio": 0,
                   "policy": policy}}]}}}


def iptables(*lines: str) -> dict[str, Any]:
    """The recorded filter table of iptables-save (nftables holds no table)."""
    return {"network": {"firewall": {"nftables": [], "iptables": {"filter": list(lines), "rule_count": len(
        [line for line in lines if line.startswith("-A")])}}}}

def _rule(family: str, table: str, chain: str, *expr: dict[str, Any]) -> dict[str, Any]:
    return {"rule": {"family": family, "table": table, "chain": chain, "expr": list(expr)}}


def _dport(proto: str, right: Any) -> dict[str, Any]:
    return {"match": {"op": "==", "left": {"payload": {"protocol": proto, "field": "dport"}}, "right": right}}


ACCEPT: dict[str, Any] = {"accept": None}


def ufw_table(*allowed: int) -> list[dict[str, Any]]:
    """ufw's chains as iptables-nft loads them into `ip filter` (the parts the walk reads: its
    INPUT policy drop, the loopback and established accepts, ufw-not-local's `--dst-type
    LOCAL` return and drop, ufw-user-input's `ufw allow PORT/tcp` rules), and the IPv6 table's
    INPUT policy drop."""
    t = ("ip", "filter")
    chain = {"family": "ip", "table": "filter"}

    def jump(target: str) -> dict[str, Any]:
        return {"jump": {"target": target}}
    return [
        {"table": {"family": "ip", "name": "filter"}},
        {"chain": {**chain, "name": "INPUT", "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}},
        {"table": {"family": "ip6", "name": "filter"}},
        {"chain": {"family": "ip6", "table": "filter", "name": "INPUT", "type": "filter", "hook": "input", "prio": 0,
                   "policy": "drop"}},
        {"chain": {"family": "ip6", "table": "filter", "name": "ufw6-user-input"}},
        *({"chain": {**chain, "name": n}} for n in ("ufw-before-input", "ufw-not-local", "ufw-user-input")),
        _rule(*t, "INPUT", {"counter": None}, jump("ufw-before-input")),
        _rule(*t, "ufw-before-input", {"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "lo"}}, ACCEPT),
        _rule(*t, "ufw-before-input", {"match": {"op": "in", "left": {"ct": {"key": "state"}},
                                                 "right": ["related", "established"]}}, ACCEPT),
        _rule(*t, "ufw-before-input", jump("ufw-not-local")),
        _rule(*t, "ufw-before-input", jump("ufw-user-input")),
        _rule(*t, "ufw-not-local", {"match": {"op": "==", "left": {"fib": {"result": "type", "flags": ["daddr"]}},
                                              "right": "local"}}, {"return": None}),
        _rule(*t, "ufw-not-local", {"drop": None}),
        *(_rule(*t, "ufw-user-input", {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}},
                _dport("tcp", port), {"counter": None}, ACCEPT) for port in allowed),
    ]


def hostcheck_table(*opened: int) -> list[dict[str, Any]]:
    """The profile's `inet hostcheck` input chain: SSH from the admin range, ``opened`` to everyone."""
    t = ("inet", "hostcheck")
    return [
        {"table": {"family": "inet", "name": "hostcheck"}},
        {"chain": {"family": "inet", "table": "hostcheck", "name": "input", "type": "filter", "hook": "input",
                   "prio": -10, "policy": "drop"}},
        _rule(*t, "input", {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}},
                                      "right": "@admin_v4"}}, _dport("tcp", 22), ACCEPT),
        *([_rule(*t, "input", _dport("tcp", {"set": list(opened)}), ACCEPT)] if opened else []),
    ]


def ruleset(*parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"network": {"firewall": {"iptables": None, "nftables": [item for part in parts for item in part]}}}


def recorded_ufw() -> dict[str, Any]:
    """ufw's real rules as iptables-nft loads them (conntrack and addrtype as xtables matches)."""
    recorded = json.loads((Path(__file__).parents[2] / "recorded/nft-ufw-beside-hostcheck-debian13.json").read_text())
    items = parse_nft_ruleset(json.dumps({"nftables": recorded["nftables"]}))
    assert isinstance(items, list)
    return {"network": {"firewall": {"iptables": None, "nftables": items}}}


RECORDED_UFW = recorded_ufw()

CASES = [
    # (check, facts, threshold, status, measured)
    # NET-1010 firewall
    ("NET-1010", nft_input("drop"), None, "pass", "nftables: input drop"),
    ("NET-1010", nft_input("accept"), None, "fail", "nftables: input accept"),
    ("NET-1010", iptables(":INPUT ACCEPT [0:0]", "-A INPUT -p tcp --dport 22 -j ACCEPT"), None, "fail", "iptables: input accept"),
    ("NET-1010", iptables(":INPUT ACCEPT [0:0]", "-A INPUT -j DROP"), None, "pass", "iptables: input drop"),
    ("NET-1010", iptables(":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]"), None, "fail", "no firewall rules"),
    ("NET-1010", ruleset(ufw_table(22)), None, "pass", "ufw: input drop"),
    ("NET-1010", ruleset(hostcheck_table(8082), ufw_table(22)), None, "pass", "the hostcheck table and ufw: input drop"),
    ("NET-1010", iptables(":INPUT DROP [0:0]", ":ufw-user-input - [0:0]", "-A INPUT -j ufw-user-input"), None, "pass",
     "ufw: input drop"),
    # NET-1080 a port the profile opens, dropped by ufw (a real ufw ruleset, then synthetic ones)
    ("NET-1080", RECORDED_UFW, None, "fail", "ufw drops 8082/tcp"),
    ("NET-1010", RECORDED_UFW, None, "pass", "the hostcheck table and ufw: input drop"),
    ("NET-1080", ruleset(hostcheck_table(8082), ufw_table(22)), None, "fail", "ufw drops 8082/tcp"),
    ("NET-1080", ruleset(hostcheck_table(8082, 8083), ufw_table(22, 8083)), None, "fail", "ufw drops 8082/tcp"),
    ("NET-1080", ruleset(hostcheck_table(8082), ufw_table(22, 8082)), None, "pass", "ufw allows 8082/tcp"),
    ("NET-1080", ruleset(hostcheck_table(), ufw_table(22)), None, "pass", "no port opened to everyone"),
    ("NET-1080", ruleset(ufw_table(22)), None, "pass", "no hostcheck table"),
    ("NET-1080", ruleset(hostcheck_table(8082)), None, "pass", "ufw not running"),
    # an allow rule this audit cannot read (an xt match iptables-nft could not translate)
    ("NET-1080", ruleset(hostcheck_table(8082), ufw_table(22), [_rule("ip", "filter", "ufw-user-input",
                                                                     {"xt": {"type": "match", "name": "multiport"}}, ACCEPT)]),
     None, "unknown", None),
    ("NET-1080", {"network": {"firewall": {"nftables": Unknown("nft failed: permission denied"), "iptables": None}}}, None,
     "unknown", None),
    # NET-1090 LLMNR
    ("NET-1090", {"network": {"listening": [{"proto": "udp", "port": 5355, "address": "0.0.0.0", "exposure": "all",
                                              "process": "systemd-resolve"}]}}, None, "fail",
     "listening on 5355: udp (systemd-resolve)"),
    ("NET-1090", {"network": {"listening": [{"proto": "udp", "port": 5355, "address": "127.0.0.1", "exposure": "loopback"},
                                             {"proto": "udp", "port": 53, "address": "127.0.0.53", "exposure": "loopback"}]}},
     None, "pass", "nothing listening on 5355"),
    ("NET-1090", {"network": {"listening": Unknown("ss failed")}}, None, "unknown", None),
    ("NET-1010", {"network": {"firewall": {"nftables": Unknown("nft failed: permission denied"), "iptables": None}}}, None,
     "unknown", None),
    ("NET-1010", {"network": {"firewall": Unknown("root is needed to read the ruleset")}}, None, "unknown", None),
    # NET-1020 wired
    ("NET-1020", {"network": {"default_route": {"interface": "enp5s0", "kind": "wired"}}}, None, "pass", "wired (enp5s0)"),
    ("NET-1020", {"network": {"default_route": {"interface": "wlp2s0", "kind": "wireless"}}}, None, "fail", "wireless (wlp2s0)"),
    ("NET-1020", {"network": {"default_route": None}}, None, "fail", "no default route"),
    ("NET-1020", {"network": {"default_route": {"interface": "x", "kind": Unknown("no sysfs")}}}, None, "unknown", None),
    # NET-1030 CGNAT, from raw evidence
    ("NET-1030", path(), None, "unknown", None),
    ("NET-1030", path(hops=hops("192.168.1.1", "203.0.113.2")), None, "unknown", None),  # public hop: no proof
    ("NET-1030", path(router_upnp=router("198.51.100.2")), None, "pass", "no CGNAT"),
    ("NET-1030", path(stun=NO_NAT, local_ipv4="198.51.100.9"), None, "pass", "no CGNAT"),
    ("NET-1030", path(local_ipv4="100.100.0.10"), None, "fail", "CGNAT"),
    ("NET-1030", path(router_natpmp=router("100.64.0.2")), None, "fail", "CGNAT"),
    ("NET-1030", path(hops=hops("192.168.1.1", "100.64.0.1")), None, "unknown", "likely"),
    # The router's claim is contradicted by the shared-space hop beyond it: two heuristics.
    ("NET-1030", path(hops=hops("192.168.1.1", "100.64.0.1"), router_upnp=router("198.51.100.2")), None, "fail", "CGNAT"),
    # A private router beyond it, or the carrier answering from the claimed address: never a pass.
    ("NET-1030", path(hops=hops("192.168.1.1", "10.0.0.1"), router_upnp=router("198.51.100.2")), None, "unknown", "likely"),
    ("NET-1030", path(hops=hops("192.168.1.1", "198.51.100.2"), router_upnp=router("198.51.100.2")), None, "unknown", "likely"),
    ("NET-1030", path(hops=hops("192.168.1.1", "100.64.0.1"), router_upnp=router("10.0.0.2")), None, "fail", "CGNAT"),
    ("NET-1030", {"network": {"path": OFFLINE}}, None, "unknown", None),
    # ... and from facts recorded by an older hostcheck (no raw evidence: the recorded verdict)
    # NET-1110 double NAT
    ("NET-1110", path(), None, "unknown", None),
    ("NET-1110", path(router_upnp=router("10.0.0.2")), None, "fail", "double NAT"),
    ("NET-1110", path(hops=hops("192.168.1.1", "10.0.0.1"), router_natpmp=router(None)), None, "fail", "double NAT"),
    ("NET-1110", path(hops=hops("192.168.1.1", "10.0.0.1")), None, "unknown", "likely"),
    ("NET-1110", path(router_upnp=router("198.51.100.2")), None, "pass", "no double NAT"),
    ("NET-1110", path(stun=NO_NAT, local_ipv4="198.51.100.9"), None, "pass", "no double NAT"),
    ("NET-1110", {"network": {"path": OFFLINE}}, None, "unknown", None),
    # NET-1120 IPv4 / IPv6-only
    ("NET-1120", path(), None, "pass", "IPv4"),
    ("NET-1120", path(local_ipv4=None, local_ipv4_reason="no IPv4 route (Network is unreachable)", local_ipv6="2001:db8:1::10", stun=[]), None, "fail", "IPv6-only"),
    ("NET-1120", path(local_ipv4=None, local_ipv4_reason="no IPv4 route (Network is unreachable)", stun=[]), None, "fail", "no IPv4"),
    ("NET-1120", path(local_ipv4=Unknown("the STUN phase did not finish")), None, "unknown", None),
    ("NET-1120", {"network": {"default_route": {"interface": "eth0", "gateway": "192.168.1.1"}, "ipv6_global": False}}, None, "pass", "IPv4"),
    ("NET-1120", {"network": {"default_route": {"interface": "eth0", "gateway": "fe80::1"}, "ipv6_global": True}}, None, "fail", "IPv6-only"),
    ("NET-1120", {"network": {"default_route": None, "ipv6_global": False}}, None, "fail", "no IPv4"),
    ("NET-1120", {"network": {"default_route": None, "ipv6_global": Unknown("no /proc")}}, None, "unknown", None),
    ("NET-1120", {"network": {"default_route": Unknown("no routing table")}}, None, "unknown", None),
    # NET-1040 inbound ports per GPU, IPv4 only
    ("NET-1040", inbound("198.51.100.2", THREE), 3, "pass", 3.0),
    ("NET-1040", inbound("198.51.100.2", THREE, gpus=2), 3, "fail", 1.5),
    ("NET-1040", inbound("198.51.100.2", {**both(40000), (40001, "tcp"): "reachable", (40001, "udp"): "unreachable"}), 1, "pass", 1.0),
    ("NET-1040", inbound("198.51.100.2", {(40001, "tcp"): "reachable", (40001, "udp"): "unreachable"}), 1, "fail", 0.0),
    ("NET-1040", inbound("2001:db8:1::10", THREE), 3, "fail", 0.0),  # reached over IPv6 only
    ("NET-1040", inbound("::ffff:198.51.100.2", THREE), 3, "pass", 3.0),  # IPv4 seen by a dual-stack server
    ("NET-1040", {"network": {"inbound": {"probed": False, "ports": [], "reason": "no outside probe"}}}, 3, "unknown", None),
    ("NET-1040", {"network": {"inbound": OFFLINE}}, 3, "unknown", None),
    # NET-1045 a port reached from outside, per machine: the GPU count does not divide it
    ("NET-1045", inbound("198.51.100.2", THREE, gpus=2), 1, "pass", 3),
    ("NET-1045", inbound("198.51.100.2", {(40001, "tcp"): "reachable", (40001, "udp"): "unreachable"}), 1, "fail", 0),
    ("NET-1045", inbound("2001:db8:1::10", THREE), 1, "fail", 0.0),  # reached over IPv6 only
    ("NET-1045", {"network": {"inbound": {"probed": False, "ports": [], "reason": "no outside probe"}}}, 1, "unknown", None),
    # NET-1040/1045 through hairpin NAT: a success from inside the LAN is never counted
    ("NET-1040", ranged(40000, 40002, THREE, seen_from="inside", peer="192.168.1.1"), 3, "unknown", None),
    ("NET-1045", ranged(40000, 40199, WHOLE, seen_from="inside", peer="192.168.1.1"), 1, "unknown", None),
    # NET-1130 the forwarded range, first to last, TCP and UDP, from outside
    ("NET-1130", ranged(40000, 40199, WHOLE), None, "pass", f"{len(WHOLE)} of {len(WHOLE)} reached"),
    ("NET-1130", ranged(40000, 40199, SHRUNK), None, "fail", f"{sum(v == 'reachable' for v in SHRUNK.values())} of {len(SHRUNK)} reached"),
    ("NET-1130", ranged(40000, 40199, TCP_ONLY), None, "fail", f"{len(SAMPLE)} of {len(TCP_ONLY)} reached"),
    ("NET-1130", ranged(40000, 40199, WHOLE, seen_from="inside", peer="192.168.1.1"), None, "unknown", None),
    ("NET-1130", ranged(40000, 40199, WHOLE, peer="2001:db8:1::10"), None, "fail", "none over IPv4"),
    ("NET-1130", ranged(40000, 40199, {**WHOLE, (40199, "udp"): "unverified"}), None, "unknown", f"{len(WHOLE) - 1} of {len(WHOLE)} reached"),
    ("NET-1130", ranged(41000, 41010, WHOLE), None, "unknown", None),  # no probed port lies in the range
    ("NET-1130", {"network": {"port_range": Unknown("no port range configured"), "inbound": inbound("198.51.100.2", WHOLE)["network"]["inbound"]}}, None, "unknown", None),
    ("NET-1130", {"network": {"port_range": {"first": 40000, "last": 40199}, "inbound": {"probed": False, "ports": [], "reason": "no probe"}}}, None, "unknown", None),
    # NET-1140 the range's size per GPU: count / GPUs against the policy's ports per GPU
    ("NET-1140", ranged(40000, 40199, WHOLE, gpus=2), 3, "pass", 200 / 2),
    ("NET-1140", ranged(40000, 40004, WHOLE, gpus=2), 3, "fail", 5 / 2),
    ("NET-1140", {"network": {"port_range": Unknown("/var/lib/vastai_kaalia/host_port_range: 40200-40000 is reversed")}}, 3, "unknown", None),
    # NET-1050 mapping behaviour
    ("NET-1050", {"network": {"nat": {"mapping": "endpoint-independent"}}}, None, "pass", "endpoint-independent"),
    ("NET-1050", {"network": {"nat": {"mapping": "endpoint-independent", "mapping_method": "two-servers"}}}, None, "pass", "endpoint-independent"),
    ("NET-1050", {"network": {"nat": {"mapping": "address-and-port-dependent"}, "inbound": {"ports": []}}}, None, "fail", "address-and-port-dependent"),
    ("NET-1050", {"network": {"nat": {"mapping": "endpoint-dependent"}, "inbound": {"ports": []}}}, None, "fail", "endpoint-dependent"),
    ("NET-1050", {"network": {"nat": {"mapping": "address-dependent"}, "inbound": {"ports": [{"port": 1, "proto": "tcp", "result": "reachable"}]}}}, None, "pass", "address-dependent"),
    ("NET-1050", {"network": {"nat": {"mapping": "unknown", "reason": "no answer"}}}, None, "unknown", None),
    ("NET-1050", {"network": {"nat": OFFLINE}}, None, "unknown", None),
    # NET-1060 global IPv6
    ("NET-1060", {"network": {"ipv6_global": True}}, None, "pass", "yes"),
    ("NET-1060", {"network": {"ipv6_global": False}}, None, "fail", "no"),
    ("NET-1060", {"network": {"ipv6_global": Unknown("no /proc/net/if_inet6")}}, None, "unknown", None),
    # PLAT-1010 platform closed
    ("PLAT-1010", {}, "closed to new hosts", "fail", "not accepting"),
]


@pytest.mark.parametrize(("check_id", "facts", "threshold", "status", "measured"), CASES)
def test_network_check_outcome(check_id: str, facts: dict[str, Any], threshold: Any, status: str, measured: Any) -> None:
    outcome = run_check(REGISTRY[check_id], facts, threshold)
    assert (outcome.status, outcome.measured) == (status, measured), outcome.detail


def test_every_network_check_has_table_cases() -> None:
    from hostcheck.checks import inbound, network

    ids = {meta.id for meta in REGISTRY.values() if meta.func.__module__ in (network.__name__, inbound.__name__)}
    covered = {case[0] for case in CASES}
    # NET-1070 (bandwidth) has its own tests with its measurement; NET-1150 and NET-1160 are
    # judged on sysfs as the kernel writes it (test_link_read_from_sysfs_and_judged).
    assert ids - covered <= {"NET-1070", "NET-1150", "NET-1160"}


def test_saved_evidence_is_judged_with_todays_rules() -> None:
    """A file whose recorded verdict said "no" on a public hop alone is judged unknown today."""
    facts = path(hops=hops("192.168.1.1", "203.0.113.2"))
    facts["network"]["cgnat"] = {"verdict": "no", "signals": []}
    outcome = run_check(REGISTRY["NET-1030"], facts, None)
    assert outcome.status == "unknown"
    assert "public address" in outcome.detail


def test_ipv6_only_ports_say_why_they_do_not_count() -> None:
    outcome = run_check(REGISTRY["NET-1040"], inbound("2001:db8:1::10", THREE), 3)
    assert "over IPv6" in outcome.detail and "3 of 3 probed ports reachable" in outcome.detail


def test_a_shrunk_range_names_the_ports_and_what_the_platform_needs() -> None:
    outcome = run_check(REGISTRY["NET-1130"], ranged(40000, 40199, SHRUNK), None)
    lost = ", ".join(str(p) for p in SAMPLE if p > 40099)
    assert f"TCP {lost}; UDP {lost}" in outcome.detail
    assert "40000-40199 forwarded, TCP and UDP" in outcome.detail


def test_a_tcp_only_forward_names_every_udp_port() -> None:
    outcome = run_check(REGISTRY["NET-1130"], ranged(40000, 40199, TCP_ONLY), None)
    assert f"not reached from outside: UDP {', '.join(map(str, SAMPLE))};" in outcome.detail


def test_a_hairpin_success_says_where_it_came_from() -> None:
    outcome = run_check(REGISTRY["NET-1130"], ranged(40000, 40199, WHOLE, seen_from="inside", peer="192.168.1.1"), None)
    assert "inside the LAN" in outcome.detail and "192.168.1.1" in outcome.detail


# ------------------------------------------------------------ link speed and duplex (NET-1150/1160)
# sysfs as the kernel writes it: `speed` in Mb/s ("-1" before the link negotiates; reading it
# fails with EINVAL while the interface is down), `duplex` "full", "half" or "unknown".
VERIFIED_MBPS = 500  # vast-verified's NET-1150 line: "Vast requires 500 Mbps down and up"


def sysfs_link(tmp_path: Path, speed: str | None, duplex: str | None) -> dict[str, Any]:
    from hostcheck.collectors.network_local import link_mode

    base = tmp_path / "enp1s0"
    base.mkdir()
    for name, text in (("speed", speed), ("duplex", duplex)):
        if text is not None:
            (base / name).write_text(text + "\n")
    return link_mode("enp1s0", str(tmp_path))


def wired(link: dict[str, Any]) -> dict[str, Any]:
    return {"network": {"default_route": {"interface": "enp1s0", "gateway": "192.168.1.1", "kind": "wired", **link}}}


@pytest.mark.parametrize(("speed", "duplex", "speed_status", "duplex_status"), [
    ("100", "half", "fail", "fail"),   # the renegotiated link of a worn cable
    ("1000", "full", "pass", "pass"),
    ("500", "full", "pass", "pass"),  # exactly the line
    ("-1", "unknown", "unknown", "unknown"),  # not negotiated
    (None, None, "unknown", "unknown"),  # no speed or duplex file
    ("99999999999", "sideways", "unknown", "unknown"),  # not the kernel's values
    ("\u0661\u0660\u0660\u0660", "FULL", "unknown", "unknown"),
])
def test_link_read_from_sysfs_and_judged(tmp_path: Path, speed: str | None, duplex: str | None,
                                         speed_status: str, duplex_status: str) -> None:
    link = sysfs_link(tmp_path, speed, duplex)
    judged_speed = run_check(REGISTRY["NET-1150"], wired(link), VERIFIED_MBPS)
    judged_duplex = run_check(REGISTRY["NET-1160"], wired(link), None)
    assert (judged_speed.status, judged_duplex.status) == (speed_status, duplex_status), (judged_speed, judged_duplex)
    if speed_status != "unknown":
        assert judged_speed.measured == int(str(speed))
        assert (int(str(speed)) >= VERIFIED_MBPS) == (speed_status == "pass")
    else:
        assert "enp1s0" in judged_speed.detail


def test_a_link_that_says_nothing_about_a_cable_is_unknown_with_the_reason() -> None:
    for kind, words in (("wireless", "is wireless"), ("virtual", "is virtual")):
        facts = {"network": {"default_route": {"interface": "x0", "gateway": None, "kind": kind,
                                               "speed_mbps": 10000, "duplex": "full"}}}
        for check_id in ("NET-1150", "NET-1160"):
            assert run_check(REGISTRY[check_id], facts, VERIFIED_MBPS).detail.startswith(f"x0 {words}")
    no_route = run_check(REGISTRY["NET-1150"], {"network": {"default_route": None}}, VERIFIED_MBPS)
    assert no_route.status == "unknown"
    # facts recorded before the link was collected
    old = run_check(REGISTRY["NET-1150"], {"network": {"default_route": {"interface": "eth0", "kind": "wired"}}},
                    VERIFIED_MBPS)
    assert old.status == "unknown" and old.detail == "eth0: link speed and duplex not collected"
