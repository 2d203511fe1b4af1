"""Network reachability: NAT behaviour (STUN/RFC 5780), CGNAT signals, inbound ports.

Fills ``network.nat``, ``network.cgnat`` and ``network.inbound`` (docs/facts.md). All
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
from hostcheck.netaddr import classify_address
from hostcheck.netprobe import cgnat as cg
from hostcheck.netprobe.client import BindingResult, fmt_address, source_address, stun_binding
from hostcheck.netprobe.discovery import UNKNOWN, NatDiscovery, discover_nat
from hostcheck.netprobe.gateway import (
    RouterAnswer,
    default_gateway_v4,
    natpmp_external_address,
    upnp_external_address,
)
from hostcheck.netprobe.hops import udp_hops
from hostcheck.netprobe.probe_client import request_probe
from hostcheck.netprobe.servers import ResolvedServer, resolve_servers

SECTION = "network"
TIMEOUT = 6.0
NEEDS_NETWORK = True
OFFLINE_KEYS = ("nat", "cgnat", "inbound")

DEFAULT_STUN_SERVERS: tuple[str, ...] = ("stun.nextcloud.com:3478", "stun.l.google.com:19302")
NETWORK_BUDGET_S = 5.5
"""All network probes together, worst case (silent servers). Below TIMEOUT so the
collector always returns its own Unknowns instead of being cut off by the runner."""
RESOLVE_TIMEOUT_S = 1.5
NATPMP_TIMEOUT_S = 1.0
UPNP_TIMEOUT_S = 2.5
UPNP_DISCOVER_MS = 1000
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
    return {"nat": Unknown(reason), "cgnat": Unknown(reason), "inbound": Unknown(reason)}


def collect(ctx: CollectContext) -> dict[str, Any]:
    if ctx.offline:
        return offline_facts()
    budget = NETWORK_BUDGET_S
    if ctx.deadline:
        budget = min(budget, ctx.remaining() - MARGIN_S)
    return probe_reachability(
        stun_servers=list(ctx.stun_servers) or list(DEFAULT_STUN_SERVERS),
        public_ranges=list(ctx.public_ranges),
        probe_url=ctx.probe_url,
        probe_token=ctx.probe_token,
        probe_fingerprint=ctx.probe_fingerprint,
        probe_ports=list(ctx.probe_ports),
        deadline=time.monotonic() + max(0.0, budget),
    )


def probe_reachability(
    *,
    stun_servers: list[str],
    public_ranges: list[str],
    probe_url: str | None,
    probe_token: str | None,
    probe_ports: list[int],
    deadline: float,
    probe_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Run every reachability probe concurrently and return the three facts subtrees."""
    probes_end = deadline - 2 * JOIN_SLACK_S
    stun = _Task("STUN", lambda: _stun_phase(stun_servers, public_ranges, probes_end))
    gateway = default_gateway_v4()
    if isinstance(gateway, Unknown):
        natpmp: _Task | None = None
    else:
        natpmp = _Task(
            "NAT-PMP", lambda: natpmp_external_address(gateway, _left(probes_end, NATPMP_TIMEOUT_S))
        )
    upnp = _Task("UPnP", lambda: upnp_external_address(_left(probes_end, UPNP_TIMEOUT_S), UPNP_DISCOVER_MS))
    inbound_task = None
    if probe_url and probe_token and probe_ports:
        ports = [(p, proto) for p in probe_ports for proto in ("tcp", "udp")]
        inbound_task = _Task(
            "inbound probe", lambda: request_probe(
                probe_url, probe_token, ports, _left(probes_end, 5.0), probe_fingerprint
            )
        )

    phase = stun.result(deadline)
    pmp = natpmp.result(deadline) if natpmp else gateway
    igd = upnp.result(deadline)
    inbound = _inbound_facts(
        probe_url, probe_token, probe_ports, inbound_task.result(deadline) if inbound_task else None
    )
    nat, mapped_ip, disc = _nat_facts(phase)
    signals = _cgnat_signals(phase, disc, pmp, igd, public_ranges, mapped_ip)
    return {
        "nat": nat,
        "cgnat": {"verdict": cg.cgnat_verdict(signals), "signals": signals},
        "inbound": inbound,
    }


def _left(deadline: float, cap: float) -> float:
    return max(0.05, min(cap, deadline - time.monotonic() - 0.05))


# -- STUN --------------------------------------------------------------------------------


def _stun_phase(specs: list[str], public_ranges: list[str], deadline: float) -> dict[str, Any]:
    """Resolve servers, then discovery, second-server binding, IPv6 binding and hops at once."""
    out: dict[str, Any] = {}
    join_at, deadline = deadline, deadline - JOIN_SLACK_S
    resolved = resolve_servers(specs, _left(deadline, RESOLVE_TIMEOUT_S))
    out["resolved"] = resolved
    v4 = [(r, r.v4[0]) for r in resolved if r.v4]
    v6 = [(r, r.v6[0]) for r in resolved if r.v6]
    if not v4 and not v6:
        errors = (
            "; ".join(r.error or f"{r.spec}: no address" for r in resolved) or "no STUN servers configured"
        )
        out["failure"] = f"no usable STUN server ({errors})"
        return out
    primary, primary_ip = v4[0] if v4 else v6[0]
    out["primary"] = primary
    tasks: dict[str, _Task] = {
        "discovery": _Task(
            "NAT discovery", lambda: discover_nat((primary_ip, primary.port), deadline=deadline)
        ),
    }
    if len(v4) > 1:
        second, second_ip = v4[1]
        out["secondary_spec"] = second.spec
        tasks["secondary"] = _Task(
            "second STUN server", lambda: stun_binding((second_ip, second.port), deadline=deadline)
        )
    if ":" not in primary_ip:
        tasks["hops"] = _Task(
            "hop probe", lambda: udp_hops(primary_ip, timeout=_left(deadline, HOP_TIMEOUT_S))
        )
    out["ipv6_local"] = None
    if v6:
        server6, ip6 = v6[0]
        try:
            local6 = source_address((ip6, server6.port), socket.AF_INET6)
        except OSError as exc:
            out["ipv6_failure"] = f"no IPv6 route ({exc.strerror or exc})"
        else:
            if classify_address(local6, public_ranges) == "global":
                out["ipv6_local"] = local6
                out["ipv6_server"] = server6
                tasks["ipv6"] = _Task(
                    "IPv6 STUN binding", lambda: stun_binding((ip6, server6.port), deadline=deadline)
                )
            else:
                out["ipv6_failure"] = f"no global IPv6 address (source {local6})"
    else:
        out["ipv6_failure"] = "no STUN server with an IPv6 address"
    for key, task in tasks.items():
        out[key] = task.result(join_at)
    return out


def _nat_facts(phase: Any) -> tuple[dict[str, Any], str | None, NatDiscovery | None]:
    if isinstance(phase, Unknown):
        reason = phase.reason
        return _nat_unknown(reason), None, None
    if "failure" in phase:
        return _nat_unknown(phase["failure"]), None, None
    primary: ResolvedServer = phase["primary"]
    disc = phase.get("discovery")
    server = primary.spec
    if not isinstance(disc, NatDiscovery):
        reason = disc.reason if isinstance(disc, Unknown) else "NAT discovery did not run"
        facts = _nat_unknown(reason)
        facts["server"] = server
        return facts, None, None
    reason = disc.reason
    mapped_unknown = Unknown(reason or "no mapped address")
    nat: dict[str, Any] = {
        "mapping": disc.mapping,
        "filtering": disc.filtering,
        "mapped_address": disc.mapped[0] if disc.mapped else mapped_unknown,
        "mapped_port": disc.mapped[1] if disc.mapped else mapped_unknown,
        "server": server,
        "hairpinning": disc.hairpinning if disc.hairpinning is not None else Unknown(_hairpin_reason(disc)),
        "reason": reason,
        "local_address": fmt_address(disc.local) if disc.local else None,
        "other_address": fmt_address(disc.other_address) if disc.other_address else None,
        "mapped_address_v6": _v6_mapped(phase),
        "packets_sent": disc.packets_sent,
        "duration_s": disc.duration_s,
        "tests": disc.tests,
    }
    return nat, (disc.mapped[0] if disc.mapped else None), disc


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
    return None if phase.get("ipv6_local") is None else Unknown("IPv6 binding not run")


def _nat_unknown(reason: str) -> dict[str, Any]:
    return {
        "mapping": UNKNOWN,
        "filtering": UNKNOWN,
        "mapped_address": Unknown(reason),
        "mapped_port": Unknown(reason),
        "server": None,
        "hairpinning": Unknown(reason),
        "reason": reason,
    }


# -- CGNAT -------------------------------------------------------------------------------


def _cgnat_signals(
    phase: Any,
    disc: NatDiscovery | None,
    pmp: Any,
    igd: Any,
    public_ranges: list[str],
    mapped_ip: str | None,
) -> list[dict[str, str]]:
    ok_phase = isinstance(phase, dict) and "failure" not in phase
    failure = (
        phase.reason
        if isinstance(phase, Unknown)
        else phase.get("failure")
        if isinstance(phase, dict) and "failure" in phase
        else (disc.reason if disc else "NAT discovery did not finish")
    )
    server = phase["primary"].spec if ok_phase else "the STUN server"
    signals = [
        cg.stun_signal(
            disc.mapped if disc else None, disc.local if disc else None, server, failure, public_ranges
        ),
        cg.local_address_signal(disc.local[0] if disc and disc.local else None, public_ranges),
        _router("router_upnp", igd, mapped_ip, public_ranges),
        _router("router_natpmp", pmp, mapped_ip, public_ranges),
    ]
    hops = phase.get("hops") if ok_phase else None
    if isinstance(hops, list):
        signals.append(cg.hop_signal(hops, None, public_ranges))
    else:
        why = (
            hops.reason
            if isinstance(hops, Unknown)
            else (failure if not ok_phase else "no IPv4 STUN server to trace towards")
        )
        signals.append(cg.hop_signal(None, why, public_ranges))
    mapped_list: list[tuple[str, tuple[str, int] | None]] = []
    if disc is not None:
        mapped_list.append((server, disc.mapped))
    sres = phase.get("secondary") if ok_phase else None
    if isinstance(sres, BindingResult):
        mapped_list.append((phase.get("secondary_spec") or fmt_address(sres.server), sres.mapped))
    signals.append(cg.servers_signal(mapped_list))
    if ok_phase:
        v6 = phase.get("ipv6")
        v6_res = v6 if isinstance(v6, BindingResult) else None
        v6_fail = (
            v6_res.error if v6_res else (v6.reason if isinstance(v6, Unknown) else phase.get("ipv6_failure"))
        )
        signals.append(
            cg.ipv6_signal(v6_res.mapped if v6_res else None, phase.get("ipv6_local"), v6_fail, public_ranges)
        )
    else:
        signals.append(cg.ipv6_signal(None, None, failure, public_ranges))
    return signals


def _router(name: str, answer: Any, mapped_ip: str | None, public_ranges: list[str]) -> dict[str, str]:
    if isinstance(answer, RouterAnswer):
        return cg.router_signal(name, answer.address, answer.detail, mapped_ip, public_ranges)
    reason = answer.reason if isinstance(answer, Unknown) else "not asked"
    return cg.signal(name, "unknown", reason)


# -- inbound -------------------------------------------------------------------------------


def _inbound_facts(url: str | None, token: str | None, ports: list[int], answer: Any) -> dict[str, Any]:
    listed = [{"port": p, "proto": proto, "result": "unverified"} for p in ports for proto in ("tcp", "udp")]
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
        return {"probed": False, "ports": [], "reason": "no ports named to probe"}
    if isinstance(answer, Unknown):
        return {"probed": False, "ports": listed, "reason": answer.reason}
    return answer
