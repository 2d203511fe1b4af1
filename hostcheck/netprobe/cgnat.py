"""Is this host behind carrier-grade NAT (RFC 6598), or behind two NATs? Signals with
evidence, and the verdicts.

The collector keeps the raw evidence (``network.path``: the host's own addresses, every STUN
server's mapped address for one socket, the hop list, the router's reported WAN address);
:func:`signals_from_path` turns it into signals and :func:`cgnat_verdict` /
:func:`double_nat_verdict` combine them. All three are pure, so a saved facts file is judged
again with the current rules (``hostcheck audit --facts``).

CGNAT:
- a shared address (100.64.0.0/10) seen directly — the STUN-mapped address, the host's
  own source address, or the router's WAN address — is a "yes";
- "no" needs positive evidence: no NAT at all (the STUN-mapped address is the host's own,
  or the host itself holds the public address), or the router's WAN address equals the
  STUN-mapped address while nothing on the path contradicts it. A router that learnt its
  "public" address by STUN itself (miniupnpd's ``ext_perform_stun``) reports the carrier's
  address, so its claim is evidence only while the path agrees: a router beyond it in
  shared or private space, a hop beyond it answering from the very address it claims as its
  own, or STUN servers seeing different addresses each contradict it, and a contradicted
  claim points at another NAT upstream ("likely", like a WAN address that differs);
- heuristics (an early hop in 100.64.0.0/10, a router WAN address that is private or
  differs from what the internet sees, servers seeing different addresses) each make it
  "likely"; two of them together make it "yes";
- a public first hop after the home router proves nothing (carrier NATs answer from public
  addresses too); anything else: "unknown".

Double NAT (the home router's WAN side is itself a private network behind another router):
- "no" when there is no NAT, or the router's WAN address is the public address;
- "yes" when the router reports a private WAN address, or when the hop after the home router
  is a private-range router and the router reports no public WAN address;
- "likely" when only the hop probe shows a second private-range router (some ISPs number
  their own first router privately); otherwise "unknown".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hostcheck.facts import Unknown
from hostcheck.knowledge.netaddr import classify_address, parse_address
from hostcheck.models import NatVerdict
from hostcheck.netprobe.hops import Hop

ROUTER_NO = "router-no"
"""A router's own word that its WAN address is the public one: a "no" only when nothing else votes."""

# (signal name, result) -> vote. Results not listed vote nothing.
VOTES: dict[tuple[str, str], str] = {
    ("stun_mapped_address", "shared-address"): NatVerdict.YES,
    ("stun_mapped_address", "no-nat"): NatVerdict.NO,
    ("local_address", "shared-address"): NatVerdict.YES,
    ("local_address", "public-address"): NatVerdict.NO,
    ("router_upnp", "shared-address"): NatVerdict.YES,
    ("router_natpmp", "shared-address"): NatVerdict.YES,
    ("router_upnp", "private"): NatVerdict.LIKELY,
    ("router_natpmp", "private"): NatVerdict.LIKELY,
    ("router_upnp", "public-differs"): NatVerdict.LIKELY,
    ("router_natpmp", "public-differs"): NatVerdict.LIKELY,
    ("router_upnp", "public-matches"): ROUTER_NO,
    ("router_natpmp", "public-matches"): ROUTER_NO,
    ("router_upnp", "public-contradicted"): NatVerdict.LIKELY,
    ("router_natpmp", "public-contradicted"): NatVerdict.LIKELY,
    ("hop_probe", "shared-address-hop"): NatVerdict.LIKELY,
    ("servers_agree", "different-addresses"): NatVerdict.LIKELY,
}

# Signals that read the same router state count once among the heuristics.
_SAME_SOURCE = {"router_upnp": "router", "router_natpmp": "router"}
_ROUTERS = ("router_upnp", "router_natpmp")

# What on the path contradicts a router's claim that its WAN address is the public one.
CONTRADICTIONS: dict[tuple[str, str], str] = {
    ("hop_probe", "shared-address-hop"): "a router beyond it is in the carrier's shared space",
    ("hop_probe", "private-upstream"): "a private-range router sits beyond it",
    ("hop_probe", "claimed-address-hop"): "a router beyond it answers from that very address",
    ("servers_agree", "different-addresses"): "STUN servers see this host from different addresses",
}


def signal(name: str, result: str, evidence: str) -> dict[str, str]:
    return {"name": name, "result": result, "evidence": evidence}


def _results(signals: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return [(str(s.get("name")), str(s.get("result"))) for s in signals if isinstance(s, Mapping)]


def _contradictions(results: Iterable[tuple[str, str]]) -> list[str]:
    return [CONTRADICTIONS[pair] for pair in results if pair in CONTRADICTIONS]


def cgnat_verdict(signals: Iterable[Mapping[str, Any]]) -> NatVerdict:
    """Combine signals into the CGNAT verdict (see the module doc)."""
    results = _results(signals)
    if _contradictions(results):
        results = [(n, "public-contradicted" if n in _ROUTERS and r == "public-matches" else r) for n, r in results]
    votes = [(_SAME_SOURCE.get(n, n), VOTES[(n, r)]) for n, r in results if (n, r) in VOTES]
    if any(v == NatVerdict.YES for _, v in votes):
        return NatVerdict.YES
    if any(v == NatVerdict.NO for _, v in votes):
        return NatVerdict.NO
    likely_sources = {src for src, v in votes if v == NatVerdict.LIKELY}
    if len(likely_sources) >= 2:
        return NatVerdict.YES
    if likely_sources:
        return NatVerdict.LIKELY
    if any(v == ROUTER_NO for _, v in votes):
        return NatVerdict.NO
    return NatVerdict.UNKNOWN


def double_nat_verdict(signals: Iterable[Mapping[str, Any]]) -> NatVerdict:
    """The double-NAT verdict: a second NAT behind a private-range router (see the module doc)."""
    results = set(_results(signals))
    if _contradictions(results):
        results = {(n, "public-contradicted" if n in _ROUTERS and r == "public-matches" else r) for n, r in results}
    if ("stun_mapped_address", "no-nat") in results or ("local_address", "public-address") in results:
        return NatVerdict.NO
    router = {r for n, r in results if n in _ROUTERS}
    private_hop = ("hop_probe", "private-upstream") in results
    if "private" in router:
        return NatVerdict.YES
    if private_hop and "public-matches" not in router and "no-address" in router:
        return NatVerdict.YES
    if private_hop:
        return NatVerdict.LIKELY
    if "public-matches" in router:
        return NatVerdict.NO
    return NatVerdict.UNKNOWN


def _fmt(addr: tuple[str, int] | None) -> str:
    if addr is None:
        return "?"
    return f"[{addr[0]}]:{addr[1]}" if ":" in addr[0] else f"{addr[0]}:{addr[1]}"


def stun_signal(
    mapped: tuple[str, int] | None,
    local: tuple[str, int] | None,
    server: str,
    failure: str | None,
    public_ranges: Sequence[str],
) -> dict[str, str]:
    if mapped is None or local is None:
        return signal("stun_mapped_address", "unknown", failure or "no STUN answer")
    scope = classify_address(mapped[0], public_ranges)
    seen = f"{server} sees this host as {_fmt(mapped)}; its own address is {_fmt(local)}"
    if mapped == local:
        return signal("stun_mapped_address", "no-nat", f"{seen}: the same, so no NAT is in the way")
    if scope == "cgnat":
        return signal("stun_mapped_address", "shared-address", f"{seen}: a shared (RFC 6598) address")
    if scope != "global":
        return signal("stun_mapped_address", "non-public", f"{seen}: not a public address ({scope})")
    return signal("stun_mapped_address", "nat", f"{seen}: behind NAT (which kind, the other signals tell)")


def local_address_signal(local_ip: str | None, public_ranges: Sequence[str]) -> dict[str, str]:
    if local_ip is None:
        return signal("local_address", "unknown", "no route towards the STUN server")
    scope = classify_address(local_ip, public_ranges)
    result = {"cgnat": "shared-address", "global": "public-address"}.get(scope, scope)
    return signal("local_address", result, f"this host sends from {local_ip} ({scope})")


def router_signal(
    name: str,
    answer_address: str | None,
    detail: str,
    mapped_ip: str | None,
    public_ranges: Sequence[str],
) -> dict[str, str]:
    if answer_address is None:
        return signal(
            name,
            "no-address",
            f"{detail}: the router reported no external address (routers such as miniupnpd do this "
            "when their WAN address is not public, or before they are connected)",
        )
    scope = classify_address(answer_address, public_ranges)
    base = f"{detail}: WAN address {answer_address} ({scope})"
    if scope == "cgnat":
        return signal(
            name, "shared-address", f"{base}: the router's own WAN is in the carrier's shared space"
        )
    if scope in ("private", "link-local", "loopback"):
        return signal(name, "private", f"{base}: another NAT sits between the router and the internet")
    if scope != "global":
        return signal(name, "other", base)
    if mapped_ip is None:
        return signal(name, "public", f"{base}; no STUN address to compare with")
    if answer_address == mapped_ip:
        return signal(
            name,
            "public-matches",
            f"{base}, the same address the STUN server sees (a router may learn it by STUN itself, "
            "so other signals can outweigh this)",
        )
    return signal(
        name, "public-differs", f"{base}, but the STUN server sees {mapped_ip}: another NAT upstream"
    )


def hop_signal(
    hops: list[Hop] | None,
    failure: str | None,
    public_ranges: Sequence[str],
    router_claims: Sequence[str] = (),
) -> dict[str, str]:
    """What the routers on the path say; ``router_claims`` are the public WAN addresses the
    home router reported, which no router beyond it can hold if the claims are true."""
    if hops is None:
        return signal("hop_probe", "unknown", failure or "hop probe not run")
    if not hops:
        return signal("hop_probe", "no-answer", "no router answered the TTL-limited probes")
    listed = ", ".join(f"{h.ttl}:{h.address}" for h in hops if not h.reached) or "none"
    routers = [h for h in hops if not h.reached]
    for h in routers:
        if h.ttl >= 2 and h.address in router_claims:
            return signal(
                "hop_probe",
                "claimed-address-hop",
                f"hop {h.ttl} answers from {h.address}, the address the home router reports as its own "
                f"WAN address: the router is not the public edge (hops {listed})",
            )
    for h in routers:
        if classify_address(h.address, public_ranges) == "cgnat":
            return signal(
                "hop_probe",
                "shared-address-hop",
                f"hop {h.ttl} is {h.address}, in the carrier's shared space 100.64.0.0/10 (hops {listed})",
            )
    # The first hop is the home router; what answers right after it tells about the WAN side.
    upstream = [h for h in routers if h.ttl >= 2]
    if upstream and upstream[0].ttl == 2:
        scope = classify_address(upstream[0].address, public_ranges)
        if scope == "global":
            return signal(
                "hop_probe",
                "public-upstream",
                f"the hop after the home router answers from a public address ({upstream[0].address}; "
                f"hops {listed}): no proof either way, carrier NATs answer from public addresses too",
            )
        return signal(
            "hop_probe",
            "private-upstream",
            f"the hop after the home router is {scope} ({upstream[0].address}; hops {listed}): "
            "double NAT, or a carrier numbering its routers privately",
        )
    return signal("hop_probe", "inconclusive", f"hops {listed}")


def servers_signal(mapped: list[tuple[str, tuple[str, int] | None]]) -> dict[str, str]:
    answered = [(srv, m) for srv, m in mapped if m is not None]
    if len(answered) < 2:
        return signal(
            "servers_agree",
            "not-tested",
            "needs answers from two STUN servers"
            + (f" (only {answered[0][0]} answered)" if answered else ""),
        )
    seen = "; ".join(f"{srv} sees {m[0]}" for srv, m in answered if m)
    if len({m[0] for _, m in answered if m}) > 1:
        return signal(
            "servers_agree",
            "different-addresses",
            f"{seen}: one connection leaves through several public addresses (a carrier NAT pool)",
        )
    return signal("servers_agree", "same-address", seen)


def ipv6_signal(
    mapped6: tuple[str, int] | None, local6: str | None, failure: str | None, public_ranges: Sequence[str]
) -> dict[str, str]:
    if local6 is None:
        return signal(
            "ipv6", "none", failure or "no global IPv6 address (no way around an IPv4 NAT over IPv6)"
        )
    if mapped6 is None:
        return signal(
            "ipv6", "unknown", f"global IPv6 address {local6}, but {failure or 'no STUN answer over IPv6'}"
        )
    if mapped6[0] == local6:
        return signal(
            "ipv6",
            "global-ipv6",
            f"global IPv6 address {local6}, seen unchanged by the STUN server: the usual way around CGNAT",
        )
    scope = classify_address(mapped6[0], public_ranges)
    return signal("ipv6", "ipv6-translated", f"IPv6 {local6} is seen as {mapped6[0]} ({scope})")


def weigh_router_claims(
    routers: list[dict[str, str]], path_signals: Iterable[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """A router's "public-matches" claim with what on the path contradicts it in its evidence."""
    against = _contradictions(_results(path_signals))
    if not against:
        return routers
    return [
        signal(r["name"], "public-contradicted", f"{r['evidence']}; but {' and '.join(against)}")
        if r["result"] == "public-matches"
        else r
        for r in routers
    ]


# -- from raw evidence (network.path) -----------------------------------------------------


def split_address(text: Any) -> tuple[str, int] | None:
    """``"1.2.3.4:5"`` / ``"[2001:db8::1]:5"`` -> (address, port); anything else -> None."""
    if not isinstance(text, str) or ":" not in text:
        return None
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or parse_address(host) is None:
        return None
    return host, int(port)


def _hops(raw: Any) -> list[Hop] | None:
    if not isinstance(raw, list):
        return None
    hops = []
    for h in raw:
        if isinstance(h, Mapping) and isinstance(h.get("ttl"), int) and isinstance(h.get("address"), str):
            hops.append(Hop(int(h["ttl"]), str(h["address"]), bool(h.get("reached"))))
    return hops


def _reason(value: Any, default: str) -> str:
    return value.reason if isinstance(value, Unknown) else default


def signals_from_path(path: Mapping[str, Any]) -> list[dict[str, str]]:
    """The CGNAT/double-NAT signals from the raw evidence the collector kept."""
    ranges = [str(r) for r in path.get("public_ranges") or [] if isinstance(r, str)]
    stun = [a for a in path.get("stun") or [] if isinstance(a, Mapping)]
    answered = [
        (str(a.get("server")), split_address(a.get("mapped")), split_address(a.get("local"))) for a in stun
    ]
    first = next(((srv, m, loc) for srv, m, loc in answered if m is not None), None)
    failure = path.get("stun_failure")
    if not isinstance(failure, str):
        errors = [str(a.get("error")) for a in stun if a.get("error")]
        failure = "; ".join(errors) or "no STUN answer"
    if first is None:
        signals = [stun_signal(None, None, "", failure, ranges)]
    else:
        signals = [stun_signal(first[1], first[2], first[0], failure, ranges)]
    local4 = path.get("local_ipv4")
    signals.append(
        local_address_signal(local4, ranges)
        if isinstance(local4, str)
        else signal(
            "local_address", "unknown", _reason(local4, str(path.get("local_ipv4_reason") or "no IPv4 route"))
        )
    )
    mapped_ip = first[1][0] if first and first[1] else None
    routers = []
    for name in _ROUTERS:
        answer = path.get(name)
        if isinstance(answer, Mapping):
            address = answer.get("address")
            address = address if isinstance(address, str) else None
            detail = str(answer.get("detail") or name)
            routers.append(router_signal(name, address, detail, mapped_ip, ranges))
        else:
            routers.append(signal(name, "unknown", _reason(answer, "not asked")))
    claims = [mapped_ip] if mapped_ip and any(r["result"] == "public-matches" for r in routers) else []
    hops = _hops(path.get("hops"))
    path_signals = [
        hop_signal(hops, _reason(path.get("hops"), "hop probe not run"), ranges, claims),
        servers_signal([(srv, m) for srv, m, _ in answered]),
    ]
    signals += weigh_router_claims(routers, path_signals) + path_signals
    v6 = path.get("stun_ipv6")
    local6 = path.get("local_ipv6") if isinstance(path.get("local_ipv6"), str) else None
    if isinstance(v6, Mapping):
        signals.append(ipv6_signal(split_address(v6.get("mapped")), local6, v6.get("error"), ranges))
    else:
        why6 = _reason(v6, str(path.get("ipv6_failure") or "")) or None
        signals.append(ipv6_signal(None, local6, why6, ranges))
    return signals
