"""Network checks: firewall, link, CGNAT, NAT behaviour, bandwidth; the platform gate (PLAT).
Inbound reachability and the forwarded range are in :mod:`hostcheck.checks.inbound`."""

from __future__ import annotations

import re
from typing import Any

from hostcheck.checks.base import (
    Outcome,
    check,
    failed,
    family,
    listed_devices,
    need,
    passed,
    unknown,
)
from hostcheck.checks.readers import DEFAULT_ROUTE as _DEFAULT_ROUTE
from hostcheck.checks.readers import (
    INBOUND_PORTS,
    firewall_summary,
    listening_sockets,
    measured_bandwidth,
    recorded_firewall,
    summary_fact,
)
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup
from hostcheck.firewall import opened
from hostcheck.models import InboundResult, NatBehaviour, NatVerdict, UfwPortVerdict
from hostcheck.netprobe import cgnat as cg

NET = family("NET", "Network", order=80)
PLAT = family("PLAT", "Platform", order=110)

_IPV6_GLOBAL = "network.ipv6_global"
_PATH = "network.path"


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
    firewall = firewall_summary(facts)
    policy = summary_fact(firewall, "input_policy")
    backend = firewall.get("backend")
    if backend == "none":
        return failed("no firewall rules")
    if firewall.get("ufw"):
        backend = "the hostcheck table and ufw" if firewall.get("profile_table") else "ufw"
    return passed(f"{backend}: input {policy}") if policy == "drop" else failed(f"{backend}: input {policy}")


@check(
    "NET-1080",
    title="Ports the host profile opens also pass ufw",
    op="==",
    threshold="none",
    why="Every packet must pass every firewall: with ufw running beside the host profile's table, a "
    "port the profile opens (a host service, the provider's range once enabled) that ufw does not "
    "allow is still closed, and a listed host with no reachable ports earns nothing.",
    fix="Disable ufw (`ufw disable`; site.yml does it and rollback enables it again), or allow the same "
    "ports in ufw (`ufw allow PORT/tcp`).",
    fix_role="firewall: firewall_enabled",
)
def opened_ports_not_dropped(facts: dict[str, Any], _threshold: Any) -> Outcome:
    ruleset = recorded_firewall(facts)
    if isinstance(ruleset, dict):
        ruleset = ruleset.get("nftables")
    if isinstance(ruleset, Unknown):
        return unknown(ruleset.reason)
    if not isinstance(ruleset, list):
        return unknown("the nftables ruleset could not be read (nft did not run)")
    verdict = opened.judge(ruleset)
    if not verdict["profile"]:
        return passed("no hostcheck table")
    if not verdict["ufw"]:
        return passed("ufw not running")
    dropped = [p["port"] for p in verdict["ports"] if p["ufw"] == UfwPortVerdict.DROPS]
    if dropped:
        return failed(f"ufw drops {', '.join(dropped)}", "opened in inet hostcheck; no rule of ufw-user-input "
                      "accepts it, and ufw's input policy is drop")
    unsure = [p["port"] for p in verdict["ports"] if p["ufw"] == UfwPortVerdict.UNDETERMINED]
    if unsure:
        return unknown(f"rules this audit cannot evaluate decide {', '.join(unsure)} in ufw-user-input")
    ports = [p["port"] for p in verdict["ports"]]
    return passed(f"ufw allows {', '.join(ports)}" if ports else "no port opened to everyone")


LLMNR_PORT = 5355  # RFC 4795


@check(
    "NET-1090",
    title="No LLMNR responder on the network",
    op="==",
    threshold="none",
    why="LLMNR (port 5355; systemd-resolved answers it unless told otherwise) asks the local network for "
    "names DNS does not resolve: any device there can answer with its own address for any name, and "
    "learns this host's name from its answers.",
    fix="Turn it off: a file /etc/systemd/resolved.conf.d/no-llmnr.conf with `[Resolve]` and "
    "`LLMNR=no`, then `systemctl restart systemd-resolved`.",
)
def no_llmnr(facts: dict[str, Any], _threshold: Any) -> Outcome:
    listening = listening_sockets(facts)
    found = sorted({
        f"{s.get('proto')}" + (f" ({s['process']})" if isinstance(s.get("process"), str) else "")
        for s in listening if s.get("port") == LLMNR_PORT and s.get("exposure") != "loopback"})
    if found:
        return failed(f"listening on {LLMNR_PORT}: {', '.join(found)}")
    return passed(f"nothing listening on {LLMNR_PORT}")


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
    route = need(facts, _DEFAULT_ROUTE)
    if route is None:
        return failed("no default route")
    kind = route.get("kind")
    if isinstance(kind, Unknown) or kind is None:
        return unknown(f"kind of interface {route.get('interface')} unknown")
    return passed(f"{kind} ({route.get('interface')})") if kind == "wired" else failed(f"{kind} ({route.get('interface')})")


def _nat_signals(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Signals judged from the raw evidence (``network.path``) with today's rules."""
    path = need(facts, _PATH)
    if not isinstance(path, dict):
        raise Missing(_PATH, "not a mapping")
    return cg.signals_from_path(path)


def _evidence(signals: Any) -> str:
    if not isinstance(signals, list):
        return ""
    return "; ".join(
        f"{s.get('name')}: {s.get('evidence')}"
        for s in signals
        if isinstance(s, dict) and s.get("result") not in (None, "unknown", "not-tested")
    )


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
    signals = _nat_signals(facts)
    verdict = cg.cgnat_verdict(signals)
    evidence = _evidence(signals)
    if verdict == NatVerdict.NO:
        return passed("no CGNAT", f"{evidence} (judged from the raw evidence)")
    if verdict == NatVerdict.YES:
        return failed("CGNAT", f"{evidence} (judged from the raw evidence)")
    if verdict == NatVerdict.LIKELY:
        return unknown(f"CGNAT likely but not proven: {evidence}", NatVerdict.LIKELY)
    return unknown(
        "CGNAT could not be determined: no positive evidence either way (the router's WAN address "
        "equal to the STUN-mapped address, or a public address on this host)"
        + (f"; seen: {evidence}" if evidence else "")
    )


@check(
    "NET-1110",
    title="Not behind double NAT",
    op="==",
    threshold="none",
    why="Behind two NATs (the home router's WAN side is another private network) a port forward "
    "on the home router never sees traffic from the internet. Vast lists double NAT as unsupported.",
    fix="Put the upstream router (often the ISP's modem-router) in bridge mode, or forward the "
    "ports on both routers (the outer one to the inner router's WAN address).",
)
def no_double_nat(facts: dict[str, Any], _threshold: Any) -> Outcome:
    signals = _nat_signals(facts)
    verdict = cg.double_nat_verdict(signals)
    evidence = _evidence(signals)
    if verdict == NatVerdict.NO:
        return passed("no double NAT", f"{evidence} (judged from the raw evidence)")
    if verdict == NatVerdict.YES:
        return failed("double NAT", f"{evidence} (judged from the raw evidence)")
    if verdict == NatVerdict.LIKELY:
        return unknown(f"double NAT likely but not proven: {evidence}", NatVerdict.LIKELY)
    return unknown(
        "double NAT could not be determined (needs the router's WAN address or the hops behind it)"
        + (f"; seen: {evidence}" if evidence else "")
    )


@check(
    "NET-1120",
    title="IPv4 connectivity (not IPv6-only)",
    op="==",
    threshold="none",
    why="Renters and the platforms' self-tests reach hosts over IPv4; Vast and Quickpod need "
    "forwarded IPv4 ports, and Vast calls IPv6-only connections unsupported.",
    fix="Ask the ISP for IPv4 (a public address, not only DS-Lite/464XLAT), or use a connection "
    "that has it.",
)
def ipv4_connectivity(facts: dict[str, Any], _threshold: Any) -> Outcome:
    path = lookup(facts, _PATH)
    if isinstance(path, dict):
        local4, local6 = path.get("local_ipv4"), path.get("local_ipv6")
        stun = [a for a in path.get("stun") or [] if isinstance(a, dict) and a.get("mapped")]
        if isinstance(local4, str):
            seen = f"; {stun[0].get('server')} saw {stun[0].get('mapped')}" if stun else ""
            return passed("IPv4", f"sends from {local4}{seen}")
        if isinstance(local4, Unknown):
            return unknown(f"IPv4 route unknown: {local4.reason}")
        why = path.get("local_ipv4_reason") or "no IPv4 source address"
        if isinstance(local6, str):
            return failed("IPv6-only", f"{why}; global IPv6 address {local6}")
        return failed("no IPv4", str(why))
    # Facts without the reachability evidence (older or --offline): the local routing table.
    route = lookup(facts, _DEFAULT_ROUTE)
    if isinstance(route, Unknown):
        return unknown(f"IPv4 route unknown: {route.reason}")
    # default_route falls back to the IPv6 table only when IPv4 has no default route.
    if isinstance(route, dict) and ":" not in str(route.get("gateway") or ""):
        return passed("IPv4", f"IPv4 default route via {route.get('interface')}")
    v6 = lookup(facts, _IPV6_GLOBAL)
    if v6 is True:
        return failed("IPv6-only", "no IPv4 default route; a global IPv6 address")
    if isinstance(v6, Unknown) or v6 is None:
        return unknown("no IPv4 default route; IPv6 unknown")
    return failed("no IPv4", "no IPv4 default route")


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
    if mapping in (None, NatBehaviour.UNKNOWN):
        reason = lookup(facts, "network.nat.reason")
        return unknown(f"NAT mapping behaviour unknown{': ' + reason if isinstance(reason, str) else ''}")
    if mapping in (NatBehaviour.ENDPOINT_INDEPENDENT, NatBehaviour.NO_NAT):
        method = lookup(facts, "network.nat.mapping_method")
        return passed(mapping, "from two servers' answers to one socket" if method == "two-servers" else "")
    inbound = lookup(facts, INBOUND_PORTS)
    if isinstance(inbound, list) and any(p.get("result") == InboundResult.REACHABLE for p in inbound):
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
    shown=lambda value: {"yes": "a global IPv6 address", "no": "no global IPv6 address"}.get(value, str(value)),
)
def ipv6_global(facts: dict[str, Any], _threshold: Any) -> Outcome:
    return passed("yes") if need(facts, _IPV6_GLOBAL) else failed("no")


@check(
    "PLAT-1010",
    title="Platform accepts hosts like this one",
    op="==",
    threshold="string",
    why="Some programmes are closed to new hosts or limited to hardware this tool does not find "
    "here; no configuration changes that.",
    fix="Choose another platform.",
    precondition="closed to new hosts",
)
def platform_accepts(_facts: dict[str, Any], threshold: Any) -> Outcome:
    return failed("not accepting", str(threshold))


SPEEDTEST_HINT = (
    "run the speed test against your probe server: `hostcheck audit --speedtest --probe URL` "
    "(or `hostcheck speedtest --probe URL`)"
)
_BOTH_WAYS = re.compile(r"^down (\d+(?:\.\d+)?) / up (\d+(?:\.\d+)?) Mbps$")
_PER_VRAM = re.compile(
    r"^(\d+(?:\.\d+)?) Mbps per GiB of VRAM each way, floor (\d+(?:\.\d+)?), cap (\d+(?:\.\d+)?)$"
)


def bandwidth_needs(threshold: str, vram_gib: float | None) -> tuple[float, float, str] | None:
    """``(down, up, how)`` in Mbps that a policy's NET-1070 threshold asks for.

    Two forms: ``down D / up U Mbps``, and ``R Mbps per GiB of VRAM each way, floor F, cap C``
    (Vast's verified tier). None when the rule needs the VRAM and it is not known.
    ValueError for any other text: a policy's threshold is data and is read strictly.
    """
    if m := _BOTH_WAYS.match(threshold):
        return float(m.group(1)), float(m.group(2)), threshold
    if m := _PER_VRAM.match(threshold):
        rate, floor, cap = (float(g) for g in m.groups())
        if vram_gib is None:
            return None
        need = min(cap, max(floor, rate * vram_gib))
        return need, need, f"{rate:g} x {vram_gib:g} GiB VRAM = {rate * vram_gib:.0f}, floor {floor:g}, cap {cap:g}: {need:g} Mbps each way"
    raise ValueError(f"NET-1070 threshold {threshold!r} is neither 'down D / up U Mbps' nor the per-VRAM form")


def _total_vram_gib(facts: dict[str, Any]) -> float | None:
    devices = listed_devices(facts)
    if not isinstance(devices, list) or not devices:
        return None
    sizes = [d.get("vram_total_mib") if isinstance(d, dict) else None for d in devices]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in sizes):
        return None
    return round(sum(sizes) / 1024, 1)  # type: ignore[arg-type]


@check(
    "NET-1070",
    title="Internet bandwidth (measured)",
    op=">=",
    unit="",  # the threshold text carries its unit ("down 100 / up 75 Mbps")
    threshold="string",
    why="Renters pull images and datasets and push results; every platform sets a bandwidth "
    "floor (Vast's verified tier scales it with VRAM), and a home uplink is the most common "
    "reason a machine earns nothing.",
    fix="Use a wired connection and a plan with more upload; measure with `hostcheck speedtest "
    "--probe URL` against a `hostcheck probe-server` near the platform's users.",
)
def bandwidth(facts: dict[str, Any], threshold: Any) -> Outcome:
    network = lookup(facts, "network")
    if isinstance(network, dict) and "bandwidth" not in network:
        return unknown(f"no speed test was run (it is opt-in: it sends bulk traffic); {SPEEDTEST_HINT}")
    bw = measured_bandwidth(facts)
    if isinstance(bw, Unknown) or not isinstance(bw, dict):
        why = bw.reason if isinstance(bw, Unknown) else "no bandwidth facts"
        return unknown(f"not measured ({why}); {SPEEDTEST_HINT}")
    needs = bandwidth_needs(str(threshold), _total_vram_gib(facts))
    down, up = bw.get("download_mbps"), bw.get("upload_mbps")
    known = {k: v for k, v in (("down", down), ("up", up)) if isinstance(v, (int, float)) and not isinstance(v, bool)}
    measured = " / ".join(f"{k} {v:g}" for k, v in known.items()) + " Mbps" if known else None
    source = f"speed test against {bw.get('server')} ({bw.get('source', 'probe-server')})"
    if needs is None:
        # Per-VRAM rule without the VRAM: only the cap and the floor decide.
        m = _PER_VRAM.match(str(threshold))
        assert m is not None
        floor, cap = float(m.group(2)), float(m.group(3))
        if len(known) == 2 and min(known.values()) >= cap:
            return passed(measured, f"{source}; at or above the {cap:g} Mbps cap whatever the VRAM")
        if known and min(known.values()) < floor:
            return failed(measured, f"{source}; below the {floor:g} Mbps floor whatever the VRAM")
        return unknown(f"the rule scales with total VRAM, which is unknown; measured {measured or 'nothing'}", measured)
    need_down, need_up, how = needs
    short = [
        f"{k} {known[k]:g} < {need:g}" for k, need in (("down", need_down), ("up", need_up)) if k in known and known[k] < need
    ]
    if short:
        return failed(measured, f"{source}; needs {how}: {', '.join(short)}")
    if len(known) < 2:
        why = bw.get("reason") or "the speed test did not finish"
        return unknown(f"not measured ({why}); {SPEEDTEST_HINT}", measured)
    return passed(measured, f"{source}; needs {how}")


def _route_link(facts: dict[str, Any], key: str) -> tuple[str, Any] | Outcome:
    """(interface, its link ``key``) of the default route, or the outcome that ends the check
    (no route, a route whose link says nothing about a cable, a value the kernel did not give)."""
    route = need(facts, _DEFAULT_ROUTE)
    if not isinstance(route, dict):
        return unknown("no default route: no link to judge")
    name = str(route.get("interface"))
    value = route.get(key)
    if route.get("kind") == "wireless":
        return unknown(f"{name} is wireless: it has no negotiated wired link (Vast asks for wired Ethernet)")
    if route.get("kind") in ("virtual", "loopback"):
        return unknown(f"{name} is virtual (a bridge, bond, VLAN, tunnel or veth): its figure is not a cable's; "
                       "read each physical member with `sudo ethtool IF`")
    if isinstance(value, Unknown):
        return unknown(value.reason)
    if value is None:
        return unknown(f"{name}: link speed and duplex not collected")
    return name, value


@check(
    "NET-1150",
    title="The default route's link is as fast as the platform's bandwidth",
    op=">=",
    unit="Mb/s",
    threshold="number",
    requirement="the wired link must be as fast as the bandwidth the platform asks for",
    why="A link renegotiates on every cable reseat, switch reboot or port move, and a marginal "
    "cable comes back slower rather than not at all: the machine stays online and keeps taking "
    "rentals while it can no longer carry the bandwidth the platform asks for.",
    fix="Read what the link negotiated with `sudo ethtool IF`; reseat or replace the cable, or "
    "move to another switch port; if the NIC advertises less than it supports, look for an "
    "`ethtool -s` in a systemd unit, a udev rule or a systemd-networkd [Link] section.",
)
def link_speed(facts: dict[str, Any], threshold: Any) -> Outcome:
    link = _route_link(facts, "speed_mbps")
    if isinstance(link, Outcome):
        return link
    name, speed = link
    if speed >= threshold:
        return passed(speed, f"{name} at {speed} Mb/s")
    return failed(speed, f"{name} negotiated {speed} Mb/s")


@check(
    "NET-1160",
    title="The default route's link is full duplex",
    op="==",
    threshold="none",
    requirement="the wired link must be full duplex",
    why="Half duplex collapses throughput under load and points at a switch port that failed to "
    "negotiate.",
    fix="Check both ends with `sudo ethtool IF`: let both the NIC and the switch port negotiate "
    "(or set both to the same fixed mode), and replace a cable or port that still comes up half.",
)
def link_full_duplex(facts: dict[str, Any], _threshold: Any) -> Outcome:
    link = _route_link(facts, "duplex")
    if isinstance(link, Outcome):
        return link
    name, duplex = link
    return passed("full", f"{name}: full duplex") if duplex == "full" else failed(duplex, f"{name}: {duplex} duplex")
