"""Inbound checks: ports reached from outside through a probe server (NET-1040, NET-1045) and
the forwarded range as the agent declares it and as measured (NET-1130, NET-1140)."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import CheckResult, Outcome, check, compare, failed, listed_devices, need, passed, unknown
from hostcheck.checks.readers import INBOUND_PORTS
from hostcheck.errors import Missing
from hostcheck.knowledge.netaddr import parse_address
from hostcheck.models import InboundResult
from hostcheck.netprobe.port_range import PortRange, judge_range, name_ports
from hostcheck.wording import counted

INBOUND = "network.inbound"
PORT_RANGE = "network.port_range"

FORWARD_PORTS_FIX = (
    "Forward a TCP+UDP port range on the router to this host, then verify with "
    "`hostcheck audit --probe URL --probe-fingerprint FP --token-file FILE --probe-port N` against a "
    "`hostcheck probe-server` outside your network (reached over IPv4; repeat --probe-port per port)."
)


def _not_from_outside(inbound: dict[str, Any]) -> Outcome | None:
    """Unknown when no probe ran, or when the probe server reached this host from inside the
    LAN (hairpin NAT, a server on the same network): such a success never counts as outside."""
    if not inbound.get("probed"):
        return unknown(f"unverified: {inbound.get('reason') or 'no outside probe was run (--probe URL)'}")
    if inbound.get("seen_from") == "inside":
        return unknown(
            f"reached from inside the LAN only: the probe server saw the private address {inbound.get('peer')} "
            "(hairpin NAT or a server on the same network), which proves nothing about outside; run "
            "`hostcheck probe-server` outside your network"
        )
    return None


def _ipv6_peer(inbound: dict[str, Any]) -> Any:
    """The address the probe server saw when it is IPv6 (the ports were then not reached over
    the IPv4 forward the platforms use), else None."""
    seen = inbound.get("peer")
    peer = parse_address(seen) if isinstance(seen, str) else None
    return peer if peer is not None and peer.version == 6 else None


def _gpu_count(facts: dict[str, Any]) -> int:
    """The GPUs listed here; 1 (per machine) when they are not known."""
    devices = listed_devices(facts)
    return len(devices) if isinstance(devices, list) and devices else 1


def _reachable_ports(facts: dict[str, Any]) -> Outcome | tuple[int, str]:
    """How many probed ports were reached from outside over IPv4 (and what was probed), or the
    outcome that settles it first: no probe run, or the probe reached over IPv6."""
    inbound = need(facts, INBOUND)
    not_outside = _not_from_outside(inbound)
    if not_outside is not None:
        return not_outside
    # A port counts once, and only if every protocol probed on it got through (Vast forwards TCP and UDP).
    by_port: dict[Any, list[str]] = {}
    ports = need(facts, INBOUND_PORTS)
    if not isinstance(ports, list):
        raise Missing(INBOUND_PORTS, "not a list")
    for probe in ports:
        by_port.setdefault(probe.get("port"), []).append(probe.get("result"))
    reachable = sum(1 for results in by_port.values() if results and all(r == InboundResult.REACHABLE for r in results))
    detail = f"{reachable} of {len(by_port)} probed ports reachable"
    peer = _ipv6_peer(inbound)
    if peer is not None:
        return failed(0.0, f"{detail}, but over IPv6 (the probe server saw {peer}): none counts as an IPv4 port")
    return reachable, detail


@check(
    "NET-1040",
    title="Inbound ports reachable from outside over IPv4, per GPU",
    op=">=",
    unit="ports/GPU",
    threshold="number",
    why="Renters connect to SSH/Jupyter/service ports on the host; only a connection from "
    "outside proves they can (tests from inside the LAN are fooled by hairpin NAT). The "
    "platforms forward IPv4 ports, so a port reached only over IPv6 does not count.",
    fix=FORWARD_PORTS_FIX,
    fix_role="firewall: firewall_provider_ports",
)
def inbound_ports(facts: dict[str, Any], threshold: Any) -> CheckResult:
    counted = _reachable_ports(facts)
    if isinstance(counted, Outcome):
        return counted
    reachable, detail = counted
    return compare(round(reachable / _gpu_count(facts), 2), threshold, detail)


@check(
    "NET-1045",
    title="An inbound port reachable from outside over IPv4",
    op=">=",
    unit="ports",
    threshold="number",
    why="A platform that connects renters to the host needs at least one port forwarded to it; "
    "only a connection from outside proves one is (tests from inside the LAN are fooled by hairpin "
    "NAT), and a port reached only over IPv6 does not count.",
    fix=FORWARD_PORTS_FIX,
    fix_role="firewall: firewall_provider_ports",
)
def inbound_port_any(facts: dict[str, Any], threshold: Any) -> CheckResult:
    counted = _reachable_ports(facts)
    return counted if isinstance(counted, Outcome) else compare(counted[0], threshold, counted[1])


def configured_range(facts: dict[str, Any]) -> PortRange:
    """``network.port_range`` as a :class:`PortRange`; :class:`Missing` when it is not known."""
    value = need(facts, PORT_RANGE)
    try:
        return PortRange(int(value["first"]), int(value["last"]), str(value.get("source") or "owner"))
    except (TypeError, KeyError, ValueError):
        raise Missing(PORT_RANGE, "not a first/last mapping") from None


RANGE_FIX = (
    "Forward the agent's whole port range, TCP and UDP, on the router to this host, and reserve the host's "
    "LAN address in the router's DHCP settings so the forward cannot point at an old address; then check "
    "again from outside: `hostcheck audit --probe URL --probe-fingerprint FP --token-file FILE` (with "
    "`--port-range FIRST-LAST` when the agent's range file cannot be read)."
)


@check(
    "NET-1130",
    title="The forwarded port range reaches this host from outside, TCP and UDP",
    op="==",
    threshold="none",
    requirement="the agent's port range must reach this host from outside, first to last port, TCP and UDP",
    why="The platform's self-test and renters use ports anywhere in the range the agent is configured for, "
    "over TCP and UDP. A router that forwards a shorter range (after a firmware update, or a range sized "
    "for fewer GPUs), only TCP, or to a LAN address the host no longer has fails the self-test with no "
    "response, although every test from inside the LAN passes (hairpin NAT).",
    fix=RANGE_FIX,
    fix_role="firewall: firewall_provider_ports",
)
def forwarded_range(facts: dict[str, Any], _threshold: Any) -> Outcome:
    port_range = configured_range(facts)
    inbound = need(facts, INBOUND)
    not_outside = _not_from_outside(inbound)
    if not_outside is not None:
        return not_outside
    peer = _ipv6_peer(inbound)
    if peer is not None:
        return failed("none over IPv4", f"the probe server saw {peer}: the range was reached over IPv6, and the "
                      "platform forwards it over IPv4")
    ports = need(facts, INBOUND_PORTS)
    if not isinstance(ports, list):
        raise Missing(INBOUND_PORTS, "not a list")
    verdict = judge_range(port_range, [p for p in ports if isinstance(p, dict)])
    span = f"{port_range.first}-{port_range.last}"
    if not verdict.probed:
        return unknown(f"no port of the range {span} was probed")
    measured = f"{verdict.reached} of {len(verdict.probed)} reached"
    if verdict.missed:
        in_use = f"; in use here, not judged: {name_ports(verdict.unverified)}" if verdict.unverified else ""
        return failed(
            measured,
            f"not reached from outside: {name_ports(verdict.missed)}{in_use}; the platform needs all of "
            f"{span} forwarded, TCP and UDP",
        )
    if verdict.unverified:
        return unknown(f"in use on this host, so the probe could not tell: {name_ports(verdict.unverified)}", measured)
    return passed(measured, f"first, last and middle ports of {span}, TCP and UDP")


@check(
    "NET-1140",
    title="The port range holds enough ports per GPU",
    requirement="the agent's port range must hold enough ports for every GPU",
    op=">=",
    unit="ports/GPU",
    threshold="number",
    why="The platform gives each rented GPU its own ports out of the agent's range; a machine that gained "
    "GPUs outgrows a range sized for fewer, and its self-test fails.",
    fix="Widen the range (the agent's host_port_range and the router's forward together), so it holds "
    "the policy's ports for every GPU.",
    fix_role="firewall: firewall_provider_ports",
)
def range_per_gpu(facts: dict[str, Any], threshold: Any) -> CheckResult:
    port_range = configured_range(facts)
    gpus = _gpu_count(facts)
    where = "the agent's range file" if port_range.source == "agent" else "--port-range"
    detail = f"{port_range.count} ports ({port_range.first}-{port_range.last}, from {where}) for {counted(gpus, 'GPU')}"
    return compare(round(port_range.count / gpus, 2), threshold, detail)
