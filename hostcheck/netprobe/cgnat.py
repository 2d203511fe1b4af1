"""Is this host behind carrier-grade NAT (RFC 6598)? Signals with evidence, and a verdict.

No single observation settles it, so each signal is reported with what was seen and the
verdict combines them (:func:`cgnat_verdict`, a pure function):

- a shared address (100.64.0.0/10) seen directly — the STUN-mapped address, the host's
  own source address, or the router's WAN address — is a "yes";
- the STUN-mapped address equal to the host's own address means no NAT at all: "no";
- heuristics (an early traceroute hop in 100.64.0.0/10, a router WAN address that is
  private or differs from what the internet sees, servers seeing different addresses)
  each make it "likely"; two of them together make it "yes";
- weak evidence against (the router reports the public address the internet sees; the
  first hop after the home router is public) gives "no" only when nothing points the
  other way, and only once STUN has shown the public address. A router that learnt its
  "public" address by STUN itself (miniupnpd's ``ext_perform_stun``) reports the
  carrier's address, so this is never strong evidence;
- nothing either way: "unknown".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hostcheck.netaddr import classify_address
from hostcheck.netprobe.hops import Hop

YES, LIKELY, WEAK_NO, NO = "yes", "likely", "weak-no", "no"

# (signal name, result) -> vote. Results not listed vote nothing.
VOTES: dict[tuple[str, str], str] = {
    ("stun_mapped_address", "shared-address"): YES,
    ("stun_mapped_address", "no-nat"): NO,
    ("local_address", "shared-address"): YES,
    ("router_upnp", "shared-address"): YES,
    ("router_natpmp", "shared-address"): YES,
    ("router_upnp", "private"): LIKELY,
    ("router_natpmp", "private"): LIKELY,
    ("router_upnp", "public-differs"): LIKELY,
    ("router_natpmp", "public-differs"): LIKELY,
    ("router_upnp", "public-matches"): WEAK_NO,
    ("router_natpmp", "public-matches"): WEAK_NO,
    ("hop_probe", "shared-address-hop"): LIKELY,
    ("hop_probe", "public-upstream"): WEAK_NO,
    ("servers_agree", "different-addresses"): LIKELY,
}

# Signals that read the same router state count once among the heuristics.
_SAME_SOURCE = {"router_upnp": "router", "router_natpmp": "router"}


def signal(name: str, result: str, evidence: str) -> dict[str, str]:
    return {"name": name, "result": result, "evidence": evidence}


def cgnat_verdict(signals: Iterable[dict[str, Any]]) -> str:
    """Combine signals into "yes" | "likely" | "no" | "unknown" (see the module doc)."""
    signals = list(signals)
    votes: list[tuple[str, str]] = []
    for s in signals:
        name, result = str(s.get("name")), str(s.get("result"))
        vote = VOTES.get((name, result))
        if vote:
            votes.append((_SAME_SOURCE.get(name, name), vote))
    if any(v == YES for _, v in votes):
        return "yes"
    if any(v == NO for _, v in votes):
        return "no"
    likely_sources = {src for src, v in votes if v == LIKELY}
    if len(likely_sources) >= 2:
        return "yes"
    if likely_sources:
        return "likely"
    # Weak evidence against counts only once STUN showed the public address: without it we
    # do not even know what the router's address or the traceroute should be compared to.
    stun_answered = any(
        str(s.get("name")) == "stun_mapped_address" and s.get("result") == "nat" for s in signals
    )
    if stun_answered and any(v == WEAK_NO for _, v in votes):
        return "no"
    return "unknown"


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
    result = "shared-address" if scope == "cgnat" else scope
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
            f"{base}, the same address the STUN server sees (weak: a router may learn it by STUN itself)",
        )
    return signal(
        name, "public-differs", f"{base}, but the STUN server sees {mapped_ip}: another NAT upstream"
    )


def hop_signal(hops: list[Hop] | None, failure: str | None, public_ranges: Sequence[str]) -> dict[str, str]:
    if hops is None:
        return signal("hop_probe", "unknown", failure or "hop probe not run")
    if not hops:
        return signal("hop_probe", "no-answer", "no router answered the TTL-limited probes")
    listed = ", ".join(f"{h.ttl}:{h.address}" for h in hops if not h.reached) or "none"
    routers = [h for h in hops if not h.reached]
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
                f"the hop after the home router is public ({upstream[0].address}; hops {listed})",
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
