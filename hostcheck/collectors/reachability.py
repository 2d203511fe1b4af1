"""Network reachability: NAT behaviour (STUN/RFC 5780), CGNAT signals, inbound ports.

Fills ``network.nat``, ``network.cgnat``, ``network.inbound`` and ``network.port_range``
(docs/facts.md): the forwarded range's sample (:mod:`hostcheck.netprobe.port_range`) rides in
the same probe request as the ``--probe-port`` ports. All
probes run at once, each bounded, inside one network budget (``NETWORK_BUDGET_S``, and
never past the audit's own deadline), so silent servers cost time only up to that budget.
Read-only: NAT-PMP and UPnP are asked for the router's address only; no port mapping is
ever requested.

Default STUN servers (used only when none are configured, never with ``--offline``):
``stun.nextcloud.com:3478`` supports RFC 5780 (OTHER-ADDRESS and CHANGE-REQUEST), which
the mapping and filtering tests need; it is listed among the RFC 5780-capable servers that
pradt2/always-online-stun checks hourly (``valid_nat_testing_hosts.txt``).
``stun.l.google.com:19302`` answers plain Binding requests only; it serves as the second
opinion for "do two servers see the same address". Public servers come and go: configure
your own with ``--stun-server`` (coturn with two addresses is an RFC 5780 server).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from hostcheck.collectors import CollectContext
from hostcheck.facts import Unknown
from hostcheck.knowledge.netaddr import classify_address
from hostcheck.models import InboundResult, NatBehaviour
from hostcheck.netprobe import cgnat as cg
from hostcheck.netprobe.discovery import NatDiscovery, discover_nat
from hostcheck.netprobe.gateway import (
    RouterAnswer,
    default_gateway_v4,
    natpmp_external_address,
    upnp_external_address,
)
from hostcheck.netprobe.hops import udp_hops
from hostcheck.netprobe.port_range import PortRange, configured_range, probe_list
from hostcheck.netprobe.probe_client import request_probe
from hostcheck.netprobe.probe_protocol import DEFAULT_MAX_PORTS
from hostcheck.netprobe.stun_client import BindingResult, fmt_address, source_address, stun_binding
from hostcheck.netprobe.stun_servers import resolve_servers

SECTION = "network"
TIMEOUT = 6.0
NEEDS_NETWORK = True
OFFLINE_KEYS = ("nat", "cgnat", "path", "inbound", "port_range")

DEFAULT_STUN_SERVERS: tuple[str, ...] = ("stun.nextcloud.com:3478", "stun.l.google.com:19302")
NETWORK_BUDGET_S = 5.5
"""All network probes together, worst case (silent servers). Below TIMEOUT so the
collector always returns its own Unknowns instead of being cut off by the runner."""
RESOLVE_TIMEOUT_S = 1.5
NATPMP_TIMEOUT_S = 1.0
UPNP_TIMEOUT_S = 1.4
UPNP_DISCOVER_MS = 300
ROUTER_WAIT_S = 1.45
"""The router (UPnP, NAT-PMP) is waited for this long from the start of the phase at most."""
ROUTE_PROBE_V4 = "192.0.2.1"
ROUTE_PROBE_V6 = "2001:db8::1"
"""Documentation addresses whose route (never a packet) tells the source address when no
STUN server of that family is configured."""
HOP_TIMEOUT_S = 1.2
MARGIN_S = 0.15
JOIN_SLACK_S = 0.05
"""Probes end this much before their waiters give up on them, so a probe that ran to its
deadline still hands over its own (more precise) reason."""


class _Task:
    """A probe in a daemon thread: abandoned (never waited for) if it outlives the budget."""

    def __init__(self, name: str, fn: Callable[[], Any]) -> None:
        self.name = name
        self.value: Any = Unknown(f"{name} did not finish within the network budget")
        self._fn = fn
        self._thread = threading.Thread(target=self._run, name=f"reach-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            value = self._fn()
        except Exception as exc:  # a probe bug becomes an Unknown with the reason
            value = Unknown(f"{self.name} failed: {type(exc).__name__}: {exc}")
        self.value = value

    def result(self, deadline: float) -> Any:
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return self.value


def offline_facts(reason: str = "not probed: --offline") -> dict[str, Any]:
    return {key: Unknown(reason) for key in OFFLINE_KEYS}


def collect(ctx: CollectContext) -> dict[str, Any]:
    if ctx.offline:
        return offline_facts()
    port_range = configured_range(ctx.port_range, ctx.agent_range_file)
    range_facts = port_range.facts() if isinstance(port_range, PortRange) else port_range
    budget = NETWORK_BUDGET_S
    if ctx.deadline:
        budget = min(budget, ctx.remaining() - MARGIN_S)
    facts = probe_reachability(
        stun_servers=list(ctx.stun_servers) or list(DEFAULT_STUN_SERVERS),
        public_ranges=list(ctx.public_ranges),
        probe_url=ctx.probe_url,
        probe_token=ctx.probe_token,
        probe_fingerprint=ctx.probe_fingerprint,
        probe_ports=list(ctx.probe_ports),
        deadline=time.monotonic() + max(0.0, budget),
        port_range=port_range if isinstance(port_range, PortRange) else None,
    )
    return {**facts, "port_range": range_facts}


def probe_reachability(
    *,
    stun_servers: list[str],
    public_ranges: list[str],
    probe_url: str | None,
    probe_token: str | None,
    probe_ports: list[int],
    deadline: float,
    probe_fingerprint: str | None = None,
    port_range: PortRange | None = None,
) -> dict[str, Any]:
    """Run every reachability probe concurrently and return the facts subtrees."""
    started = time.monotonic()
    probes_end = deadline - 2 * JOIN_SLACK_S
    stun = _Task("STUN", lambda: _stun_phase(stun_servers, public_ranges, probes_end))
    gateway = default_gateway_v4()
    # The router is asked while STUN runs and waited for no longer than the STUN phase's
    # usual length: a network without a UPnP router must not pay for the silence.
    router_end = min(probes_end, started + ROUTER_WAIT_S)
    if isinstance(gateway, Unknown):
        natpmp: _Task | None = None
    else:
        natpmp = _Task(
            "NAT-PMP", lambda: natpmp_external_address(gateway, _left(router_end, NATPMP_TIMEOUT_S))
        )
    upnp = _Task("UPnP", lambda: upnp_external_address(_left(router_end, UPNP_TIMEOUT_S), UPNP_DISCOVER_MS))
    inbound_task = None
    ports = probe_list(port_range, probe_ports, DEFAULT_MAX_PORTS)
    if probe_url and probe_token and ports:
        inbound_task = _Task(
            "inbound probe", lambda: request_probe(
                probe_url, probe_token, ports, _left(probes_end, 5.0), probe_fingerprint
            )
        )

    phase = stun.result(deadline)
    pmp = natpmp.result(router_end + JOIN_SLACK_S) if natpmp else gateway
    igd = upnp.result(router_end + JOIN_SLACK_S)
    inbound = _inbound_facts(
        probe_url, probe_token, ports, inbound_task.result(deadline) if inbound_task else None, public_ranges
    )
    nat, disc = _nat_facts(phase)
    path = _path_facts(phase, disc, pmp, igd, public_ranges)
    signals = cg.signals_from_path(path)
    return {
        "nat": nat,
        "cgnat": {
            "verdict": cg.cgnat_verdict(signals),
            "double_nat": cg.double_nat_verdict(signals),
            "signals": signals,
        },
        "path": path,
        "inbound": inbound,
    }


def _left(deadline: float, cap: float) -> float:
    return max(0.05, min(cap, deadline - time.monotonic() - 0.05))


# -- STUN --------------------------------------------------------------------------------


def _local_source(dest: str, family: int, public_ranges: list[str]) -> tuple[str | None, str | None]:
    """(the address this host sends from towards ``dest``, or None with why). Sends nothing."""
    try:
        local = source_address((dest, 9), family)
    except OSError as exc:
        return None, f"no IPv{4 if family == socket.AF_INET else 6} route ({exc.strerror or exc})"
    scope = classify_address(local, public_ranges)
    if scope in ("loopback", "link-local"):
        return None, f"only a {scope} IPv{4 if family == socket.AF_INET else 6} source address ({local})"
    return local, None


def _stun_phase(specs: list[str], public_ranges: list[str], deadline: float) -> dict[str, Any]:
    """Resolve servers, then discovery (all IPv4 servers), IPv6 binding and hops at once."""
    out: dict[str, Any] = {}
    join_at, deadline = deadline, deadline - JOIN_SLACK_S
    resolved = resolve_servers(specs, _left(deadline, RESOLVE_TIMEOUT_S))
    out["resolved"] = resolved
    v4 = [(r, r.v4[0]) for r in resolved if r.v4]
    v6 = [(r, r.v6[0]) for r in resolved if r.v6]
    towards4 = v4[0][1] if v4 else ROUTE_PROBE_V4
    towards6 = v6[0][1] if v6 else ROUTE_PROBE_V6
    out["local_ipv4"], out["local_ipv4_reason"] = _local_source(towards4, socket.AF_INET, public_ranges)
    out["local_ipv6"], out["ipv6_failure"] = _local_source(towards6, socket.AF_INET6, public_ranges)
    if out["local_ipv6"] is not None and classify_address(out["local_ipv6"], public_ranges) != "global":
        out["ipv6_failure"] = f"no global IPv6 address (source {out['local_ipv6']})"
        out["local_ipv6"] = None
    if not v4 and not v6:
        errors = (
            "; ".join(r.error or f"{r.spec}: no address" for r in resolved) or "no STUN servers configured"
        )
        out["failure"] = f"no usable STUN server ({errors})"
        return out
    tasks: dict[str, _Task] = {}
    out["specs"] = {(ip, r.port): r.spec for r, ip in v4 + v6}
    if v4 and out["local_ipv4"] is not None:
        servers = [(ip, r.port) for r, ip in v4]
        tasks["discovery"] = _Task("NAT discovery", lambda: discover_nat(servers, deadline=deadline))
        first_ip = v4[0][1]
        tasks["hops"] = _Task("hop probe", lambda: udp_hops(first_ip, timeout=_left(deadline, HOP_TIMEOUT_S)))
    elif v4:
        out["failure"] = f"IPv4 STUN servers given, but {out['local_ipv4_reason']}"
    else:
        out["failure"] = "no STUN server with an IPv4 address"
    if v6 and out["local_ipv6"] is not None:
        server6, ip6 = v6[0]
        out["ipv6_server"] = server6
        tasks["ipv6"] = _Task(
            "IPv6 STUN binding", lambda: stun_binding((ip6, server6.port), deadline=deadline)
        )
    elif not v6 and out["ipv6_failure"] is None:
        out["ipv6_failure"] = "no STUN server with an IPv6 address"
    for key, task in tasks.items():
        out[key] = task.result(join_at)
    return out


def _nat_facts(phase: Any) -> tuple[dict[str, Any], NatDiscovery | None]:
    if isinstance(phase, Unknown):
        return _nat_unknown(phase.reason), None
    disc = phase.get("discovery")
    if not isinstance(disc, NatDiscovery):
        reason = (
            disc.reason if isinstance(disc, Unknown) else phase.get("failure") or "NAT discovery did not run"
        )
        facts = _nat_unknown(reason)
        facts["mapped_address_v6"] = _v6_mapped(phase)
        return facts, None
    specs = phase.get("specs") or {}
    reason = disc.reason
    mapped_unknown = Unknown(reason or "no mapped address")
    nat: dict[str, Any] = {
        "mapping": disc.mapping,
        "filtering": disc.filtering,
        "mapping_method": disc.mapping_method,
        "mapped_address": disc.mapped[0] if disc.mapped else mapped_unknown,
        "mapped_port": disc.mapped[1] if disc.mapped else mapped_unknown,
        "server": specs.get(disc.server, fmt_address(disc.server)),
        "hairpinning": disc.hairpinning if disc.hairpinning is not None else Unknown(_hairpin_reason(disc)),
        "reason": reason,
        "local_address": fmt_address(disc.local) if disc.local else None,
        "other_address": fmt_address(disc.other_address) if disc.other_address else None,
        "mapped_address_v6": _v6_mapped(phase),
        "packets_sent": disc.packets_sent,
        "duration_s": disc.duration_s,
        "tests": disc.tests,
    }
    return nat, disc


def _hairpin_reason(disc: NatDiscovery) -> str:
    if disc.nat_present is False:
        return "no NAT: hairpinning does not apply"
    return disc.reason or "hairpinning not tested"


def _v6_mapped(phase: Any) -> Any:
    res = phase.get("ipv6")
    if isinstance(res, BindingResult):
        return res.mapped[0] if res.mapped else Unknown(res.error or "no answer over IPv6")
    if isinstance(res, Unknown):
        return res
    return None if phase.get("local_ipv6") is None else Unknown("IPv6 binding not run")


def _nat_unknown(reason: str) -> dict[str, Any]:
    return {
        "mapping": NatBehaviour.UNKNOWN,
        "filtering": NatBehaviour.UNKNOWN,
        "mapping_method": None,
        "mapped_address": Unknown(reason),
        "mapped_port": Unknown(reason),
        "server": None,
        "hairpinning": Unknown(reason),
        "reason": reason,
    }


# -- raw evidence for the CGNAT / double NAT / IPv6-only judgements -------------------------


def _path_facts(
    phase: Any, disc: NatDiscovery | None, pmp: Any, igd: Any, public_ranges: list[str]
) -> dict[str, Any]:
    """What was seen, uninterpreted (``network.path``); the checks judge it."""
    if isinstance(phase, Unknown):
        return {
            "public_ranges": list(public_ranges),
            "local_ipv4": phase,
            "local_ipv6": phase,
            "stun": [],
            "stun_failure": phase.reason,
            "stun_ipv6": phase,
            "hops": phase,
            "router_upnp": _router(igd),
            "router_natpmp": _router(pmp),
        }
    specs = phase.get("specs") or {}
    local = fmt_address(disc.local) if disc and disc.local else None
    stun = [
        {
            "server": specs.get(a.server, fmt_address(a.server)),
            "local": local,
            "mapped": fmt_address(a.mapped) if a.mapped else None,
            "other_address": fmt_address(a.other_address) if a.other_address else None,
            "error": a.error,
        }
        for a in (disc.answers if disc else [])
    ]
    failure = phase.get("failure")
    if failure is None and not isinstance(disc, NatDiscovery):
        d = phase.get("discovery")
        failure = d.reason if isinstance(d, Unknown) else "NAT discovery did not run"
    if failure is None and disc is not None and not any(a["mapped"] for a in stun):
        failure = disc.reason
    hops = phase.get("hops")
    v6 = phase.get("ipv6")
    if isinstance(v6, BindingResult):
        server6 = phase.get("ipv6_server")
        stun_v6: Any = {
            "server": server6.spec if server6 else fmt_address(v6.server),
            "local": phase.get("local_ipv6"),
            "mapped": fmt_address(v6.mapped) if v6.mapped else None,
            "error": v6.error,
        }
    else:
        stun_v6 = v6 if isinstance(v6, Unknown) else None
    return {
        "public_ranges": list(public_ranges),
        "local_ipv4": phase.get("local_ipv4"),
        "local_ipv4_reason": phase.get("local_ipv4_reason"),
        "local_ipv6": phase.get("local_ipv6"),
        "ipv6_failure": phase.get("ipv6_failure"),
        "stun": stun,
        "stun_failure": failure,
        "stun_ipv6": stun_v6,
        "hops": (
            [{"ttl": h.ttl, "address": h.address, "reached": h.reached} for h in hops]
            if isinstance(hops, list)
            else hops
            if isinstance(hops, Unknown)
            else Unknown(failure or "hop probe not run")
        ),
        "router_upnp": _router(igd),
        "router_natpmp": _router(pmp),
    }


def _router(answer: Any) -> Any:
    if isinstance(answer, RouterAnswer):
        return {"address": answer.address, "detail": answer.detail}
    return answer if isinstance(answer, Unknown) else Unknown("not asked")


# -- inbound -------------------------------------------------------------------------------


def _inbound_facts(
    url: str | None, token: str | None, ports: list[tuple[int, str]], answer: Any, public_ranges: list[str]
) -> dict[str, Any]:
    listed = [{"port": p, "proto": proto, "result": InboundResult.UNVERIFIED} for p, proto in ports]
    if not url:
        return {
            "probed": False,
            "ports": listed,
            "reason": "no probe server given (--probe URL): only a connection from outside "
            "can prove that a port is reachable",
        }
    if not token:
        return {"probed": False, "ports": listed, "reason": "a probe server URL was given without its token"}
    if not ports:
        return {"probed": False, "ports": [], "reason": "no ports named to probe (--probe-port PORT, or --port-range FIRST-LAST)"}
    if isinstance(answer, Unknown):
        return {"probed": False, "ports": listed, "reason": answer.reason}
    peer = answer.get("peer")
    if answer.get("probed") and isinstance(peer, str):
        # A probe server that connected back to a private address reached this host from
        # inside the LAN (hairpin NAT, or a server on the same network): nothing it reached
        # proves the router forwards anything from outside.
        answer["seen_from"] = "outside" if classify_address(peer, public_ranges) == "global" else "inside"
    return answer
