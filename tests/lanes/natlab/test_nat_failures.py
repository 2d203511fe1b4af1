"""The lab when things go wrong: silent and error-answering servers, UDP blocked, a server
without RFC 5780, a router that learnt its address by STUN, a probe server asked for a
third party, and the lab's own cleanup."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import natlab_builder as nb
import pytest

from hostcheck.collectors.reachability import NETWORK_BUDGET_S

pytestmark = [pytest.mark.root, pytest.mark.natlab]

# Python start-up and imports inside the namespace, on top of the collector's own budget.
STARTUP_SLACK_S = 0.6


def _signals(facts: dict) -> dict[str, dict]:
    return {s["name"]: s for s in facts["cgnat"]["signals"]}


def test_silent_server_ends_inside_budget_as_unknown(natlab: nb.NatLab) -> None:
    """A server that never answers costs one probe timeout, three packets, and says unknown."""
    natlab.start_responder("silent", "silent", nb.STUN_PORT)
    try:
        out = natlab.run_host("collect", nb.collect_args(stun_servers=[f"{nb.AUX_IP}:{nb.STUN_PORT}"]))
    finally:
        counts = natlab.stop_responder("silent")
    nat = out["result"]["nat"]
    assert (nat["mapping"], nat["filtering"]) == ("unknown", "unknown")
    assert "no answer from 203.0.113.20:3478 (3 requests" in nat["reason"]
    assert nat["mapped_address"] == {"$unknown": nat["reason"]}
    assert out["result"]["cgnat"]["verdict"] == "unknown"
    assert counts["received"] == 3  # one request, two retransmissions, then silence
    assert out["elapsed_s"] < NETWORK_BUDGET_S + STARTUP_SLACK_S


def test_silent_server_respects_a_short_audit_budget(natlab: nb.NatLab) -> None:
    """With 2 s left in the audit, the collector stops at 2 s, whatever its own budget."""
    natlab.start_responder("silent2", "silent", nb.STUN_PORT)
    try:
        out = natlab.run_host(
            "collect", nb.collect_args(stun_servers=[f"{nb.AUX_IP}:{nb.STUN_PORT}"], budget_s=2.0)
        )
    finally:
        natlab.stop_responder("silent2")
    nat = out["result"]["nat"]
    assert nat["mapping"] == "unknown"
    assert "overall time budget" in nat["reason"]
    assert out["elapsed_s"] < 2.0 + STARTUP_SLACK_S


@pytest.mark.parametrize("code", [420, 500])
def test_error_response_ends_the_probe(natlab: nb.NatLab, code: int) -> None:
    """An error response is final: one packet sent, no retransmission, no loop."""
    natlab.start_responder("err", "error", nb.STUN_PORT, code)
    try:
        out = natlab.run_host("collect", nb.collect_args(stun_servers=[f"{nb.AUX_IP}:{nb.STUN_PORT}"]))
        time.sleep(0.3)  # anything still in flight would arrive now
    finally:
        counts = natlab.stop_responder("err")
    nat = out["result"]["nat"]
    assert nat["mapping"] == "unknown"
    assert f"error response {code}" in nat["reason"]
    assert counts == {"received": 1, "answered": 1, "sources": 1}
    assert nat["packets_sent"] == 1


def test_udp_blocked_entirely(natlab: nb.NatLab) -> None:
    """No UDP gets through the home router: unknown everywhere, inside the budget."""
    natlab.set_home("masquerade", firewall=True, block_udp=True)
    out = natlab.run_host("collect", nb.collect_args())
    facts = out["result"]
    nat = facts["nat"]
    assert (nat["mapping"], nat["filtering"]) == ("unknown", "unknown")
    assert "no answer from 203.0.113.10:3478" in nat["reason"]
    assert facts["cgnat"]["verdict"] == "unknown"
    hops = _signals(facts)["hop_probe"]
    assert hops["result"] == "inconclusive" and "1:192.168.1.1" in hops["evidence"]
    assert out["elapsed_s"] < NETWORK_BUDGET_S + STARTUP_SLACK_S


def test_hairpinning_router_is_detected(natlab: nb.NatLab) -> None:
    """A router that loops traffic to its WAN address back to the LAN passes RFC 5780 4.5."""
    natlab.set_home("masquerade", firewall=False, hairpin=True)
    nat = natlab.run_host("collect", nb.collect_args())["result"]["nat"]
    assert nat["hairpinning"] is True
    assert (nat["mapping"], nat["filtering"]) == ("endpoint-independent", "address-and-port-dependent")
    hairpin = next(t for t in nat["tests"] if t["test"] == "hairpinning")
    assert hairpin["result"] == "ok" and hairpin["from"].startswith(f"{nb.HOME_LAN_IP}:")


def test_server_without_rfc5780(natlab: nb.NatLab) -> None:
    """coturn on one address sends no OTHER-ADDRESS: the address is known, behaviour unknown."""
    natlab.start_coturn("single", ips=(nb.AUX_IP,))
    try:
        out = natlab.run_host("collect", nb.collect_args(stun_servers=[f"{nb.AUX_IP}:{nb.STUN_PORT}"]))
    finally:
        natlab.stop("single")
    nat = out["result"]["nat"]
    assert nat["mapped_address"] == natlab.expected_mapped_ip
    assert (nat["mapping"], nat["filtering"]) == ("unknown", "unknown")
    assert "do not support RFC 5780 (no OTHER-ADDRESS" in nat["reason"]
    assert nat["packets_sent"] == 1
    # Plain topology: hop 2 is public, which proves nothing; the router reports no address.
    assert out["result"]["cgnat"]["verdict"] == "unknown"


# (topology, carrier answers expired packets from its public address) -> the router's claim as
# the path leaves it, what contradicts it, the CGNAT verdict.
STUN_ROUTER_CASES = {
    ("plain", False): ("public-matches", None, "no"),
    ("cgnat", False): ("public-contradicted", "in the carrier's shared space", "yes"),
    ("cgnat", True): ("public-contradicted", "answers from that very address", "likely"),
    ("double", False): ("public-contradicted", "a private-range router", "likely"),
}


@pytest.mark.parametrize(
    "natlab, carrier_public",
    [("plain", False), ("cgnat", False), ("cgnat", True), ("double", False)],
    indirect=["natlab"],
)
def test_router_that_learnt_its_address_by_stun(natlab: nb.NatLab, carrier_public: bool) -> None:
    """miniupnpd with ext_perform_stun reports the address the internet sees, equal to what STUN sees.

    Read naively that says "no CGNAT". The claim counts only when nothing on the path
    contradicts it: behind the carrier NAT the hop probe shows the shared address space (or a
    carrier router answering from the very address the router claims), behind a second home
    router a private-range hop; the verdict must never become "no" there.
    """
    router_result, contradiction, verdict = STUN_ROUTER_CASES[(natlab.isp, carrier_public)]
    natlab.start_miniupnpd(stun=True)
    natlab.carrier_icmp_from_public(carrier_public)
    try:
        out = natlab.run_host("collect", nb.collect_args())
    finally:
        natlab.carrier_icmp_from_public(False)
        natlab.start_miniupnpd(stun=False)
    facts = out["result"]
    signals = _signals(facts)
    for name in ("router_natpmp", "router_upnp"):
        assert signals[name]["result"] == router_result
        assert natlab.expected_mapped_ip in signals[name]["evidence"]
        if contradiction:
            assert contradiction in signals[name]["evidence"]
    assert facts["cgnat"]["verdict"] == verdict


@pytest.mark.parametrize(
    "body, status, message",
    [
        (
            {"ports": [{"port": nb.FORWARDED_PORT, "proto": "tcp", "nonce": "n" * 20}], "host": nb.STUN_IP1},
            400,
            "connects back only to the address the request came from",
        ),
        (
            {
                "ports": [
                    {"port": nb.FORWARDED_PORT, "proto": "tcp", "nonce": "n" * 20, "address": nb.STUN_IP1}
                ]
            },
            400,
            "exactly port, proto, nonce",
        ),
        ({"ports": [{"port": 22, "proto": "tcp", "nonce": "n" * 20}]}, 200, None),
    ],
    ids=["target-field", "per-port-address", "plain-request"],
)
def test_probe_server_never_targets_a_third_party(
    natlab: nb.NatLab, body: dict, status: int, message: str | None
) -> None:
    """A request naming another target is refused; a valid one is answered for the caller only."""
    url = f"http://{nb.INET_IP}:{nb.PROBE_SERVER_PORT}"
    out = natlab.run_host("raw_probe", {"url": url, "token": nb.PROBE_TOKEN, "body": body})["result"]
    assert out["status"] == status
    if message:
        assert message in out["body"]["error"]
    else:
        assert out["body"]["peer"] == natlab.expected_mapped_ip


def test_probe_server_wants_the_token(natlab: nb.NatLab) -> None:
    url = f"http://{nb.INET_IP}:{nb.PROBE_SERVER_PORT}"
    out = natlab.run_host(
        "probe",
        {"url": url, "token": "wrong-token-wrong-token", "ports": [[nb.FORWARDED_PORT, "tcp"]], "timeout": 5},
    )["result"]
    assert out["probed"] is False
    assert "HTTP 401" in out["reason"]
    assert [p["result"] for p in out["ports"]] == ["unverified"]


def test_offline_sends_nothing(natlab: nb.NatLab) -> None:
    natlab.start_responder("offline", "silent", nb.STUN_PORT)
    try:
        out = natlab.run_host(
            "collect", nb.collect_args(stun_servers=[f"{nb.AUX_IP}:{nb.STUN_PORT}"], offline=True)
        )
    finally:
        counts = natlab.stop_responder("offline")
    assert counts["received"] == 0
    for key in ("nat", "cgnat", "inbound"):
        assert out["result"][key] == {"$unknown": "not probed: --offline"}


def _root_state() -> dict[str, str]:
    files = [
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/net/ipv6/conf/all/forwarding",
        "/proc/sys/net/ipv4/icmp_ratelimit",
    ]
    return {f: Path(f).read_text() for f in files}


def test_lab_cleans_up_even_when_a_test_fails() -> None:
    """A lab closed by an exception leaves no namespace, no process, no changed sysctl."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    before = _root_state()
    lab = nb.NatLab(isp="cgnat", with_upnp=True)
    with pytest.raises(RuntimeError, match="boom"):
        with lab:
            lab.start_responder("r", "silent", nb.STUN_PORT)
            pids = [p.pid for p in lab.procs.values()]
            names = [lab.ns(r) for r in nb.ROLES]
            assert all(n in nb._netns_list() for n in names)
            raise RuntimeError("boom")
    assert not set(names) & set(nb._netns_list())
    for pid in pids:
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    assert lab.tmp is None
    assert _root_state() == before
