"""Network checks: firewall, link, CGNAT, NAT behaviour, inbound reachability."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import Outcome, check, compare, failed, need, passed, unknown
from hostcheck.facts import Unknown, lookup


@check(
    "NET-1010",
    title="Firewall denies inbound by default",
    op="==",
    threshold="none",
    why="With default-accept, every service on the host (and, on the LAN side, every device "
    "near it) is one misconfiguration away from the customers' containers and the internet.",
    fix="Use nftables with an input policy of drop, allowing SSH from your admin range only.",
    fix_role="firewall: firewall_enabled",
)
def firewall_default_deny(facts: dict[str, Any], _threshold: Any) -> Outcome:
    firewall = need(facts, "network.firewall")
    policy = need(facts, "network.firewall.input_policy")
    backend = firewall.get("backend")
    if backend == "none":
        return failed("no firewall rules")
    return passed(f"{backend}: input {policy}") if policy == "drop" else failed(f"{backend}: input {policy}")


@check(
    "NET-1020",
    title="Wired network connection",
    op="==",
    threshold="none",
    why="Wi-Fi drops and varies in bandwidth; Vast's stricter draft asks for wired Ethernet, "
    "and uptime is what hosts are paid for.",
    fix="Connect the host with an Ethernet cable.",
)
def wired(facts: dict[str, Any], _threshold: Any) -> Outcome:
    route = need(facts, "network.default_route")
    if route is None:
        return failed("no default route")
    kind = route.get("kind")
    if isinstance(kind, Unknown) or kind is None:
        return unknown(f"kind of interface {route.get('interface')} unknown")
    return passed(f"{kind} ({route.get('interface')})") if kind == "wired" else failed(f"{kind} ({route.get('interface')})")


@check(
    "NET-1030",
    title="Not behind carrier-grade NAT",
    op="==",
    threshold="none",
    why="Behind CGNAT (RFC 6598) the router's port forwards never see inbound traffic, so "
    "renters cannot connect. Vast lists CGNAT, double NAT and Starlink as unsupported.",
    fix="Ask the ISP for a public IPv4 address (often a free or paid option), or use a "
    "connection that has one.",
)
def no_cgnat(facts: dict[str, Any], _threshold: Any) -> Outcome:
    verdict = need(facts, "network.cgnat.verdict")
    signals = lookup(facts, "network.cgnat.signals")
    evidence = "; ".join(
        f"{s.get('name')}: {s.get('evidence')}" for s in signals if isinstance(s, dict) and s.get("result") not in (None, "unknown")
    ) if isinstance(signals, list) else ""
    if verdict == "no":
        return passed("no CGNAT", evidence)
    if verdict == "yes":
        return failed("CGNAT", evidence)
    if verdict == "likely":
        return unknown(f"CGNAT likely but not proven: {evidence}", "likely")
    return unknown(f"CGNAT could not be determined{': ' + evidence if evidence else ''}")


@check(
    "NET-1040",
    title="Inbound ports reachable from outside, per GPU",
    op=">=",
    unit="ports/GPU",
    threshold="number",
    why="Renters connect to SSH/Jupyter/service ports on the host; only a connection from "
    "outside proves they can (tests from inside the LAN are fooled by hairpin NAT).",
    fix="Forward a TCP+UDP port range on the router to this host, then verify with "
    "`hostcheck audit --probe URL --token T` against a probe server outside your network.",
    fix_role="firewall: firewall_provider_ports",
)
def inbound_ports(facts: dict[str, Any], threshold: Any) -> Outcome:
    inbound = need(facts, "network.inbound")
    if not inbound.get("probed"):
        return unknown(f"unverified: {inbound.get('reason') or 'no outside probe was run (--probe URL)'}")
    # A port counts once, and only if every protocol probed on it got through (Vast forwards TCP and UDP).
    by_port: dict[Any, list[str]] = {}
    for probe in inbound.get("ports") or []:
        by_port.setdefault(probe.get("port"), []).append(probe.get("result"))
    reachable = sum(1 for results in by_port.values() if results and all(r == "reachable" for r in results))
    devices = lookup(facts, "gpu.devices")
    gpus = len(devices) if isinstance(devices, list) and devices else 1  # per machine when GPUs are unknown
    return compare(round(reachable / gpus, 2), ">=", threshold, f"{reachable} of {len(by_port)} probed ports reachable")


@check(
    "NET-1050",
    title="NAT keeps one public mapping per local port",
    op="==",
    threshold="none",
    why="A symmetric NAT (mapping that depends on the destination) breaks the hole punching "
    "peer-to-peer services rely on; without forwarded ports such a host cannot accept renters.",
    fix="Forward ports on the router, or switch the router to endpoint-independent mapping "
    "(full-cone / 'NAT type open'); disable a 'fully random' masquerade.",
)
def nat_mapping(facts: dict[str, Any], _threshold: Any) -> Outcome:
    mapping = need(facts, "network.nat.mapping")
    if mapping in (None, "unknown"):
        reason = lookup(facts, "network.nat.reason")
        return unknown(f"NAT mapping behaviour unknown{': ' + reason if isinstance(reason, str) else ''}")
    if mapping in ("endpoint-independent", "no-nat"):
        return passed(mapping)
    inbound = lookup(facts, "network.inbound.ports")
    if isinstance(inbound, list) and any(p.get("result") == "reachable" for p in inbound):
        return passed(mapping, "but forwarded ports are reachable")
    return failed(mapping)


@check(
    "NET-1060",
    title="Global IPv6 address",
    op="==",
    threshold="none",
    why="IPv6 is the usual way around CGNAT: a global IPv6 address can be reachable where IPv4 is not "
    "(platforms still need IPv4 today; IPv6-only is unsupported on Vast).",
    fix="Enable IPv6 on the router if the ISP offers it.",
)
def ipv6_global(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return passed("yes") if need(facts, "network.ipv6_global") else failed("no")


@check(
    "PLAT-1010",
    title="Platform accepts hosts like this one",
    op="==",
    threshold="string",
    why="Some programmes are closed to new hosts or limited to hardware this tool does not find "
    "here; no configuration changes that.",
    fix="Choose another platform.",
)
def platform_accepts(_facts: dict[str, Any], threshold: Any) -> Outcome:
    return failed("not accepting", str(threshold))


def _bandwidth_unmeasured(_facts: dict[str, Any], _threshold: Any) -> Outcome:
    return unknown("hostcheck does not measure bandwidth (it sends no bulk traffic); run a speed test")


check(
    "NET-1070",
    title="Internet bandwidth",
    op=">=",
    unit="Mbps",
    threshold="number",
    why="Renters pull images and datasets; platforms set a bandwidth floor for listing.",
    fix="Measure with a speed test to a server near you; a wired connection helps.",
)(_bandwidth_unmeasured)

