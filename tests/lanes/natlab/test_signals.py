"""Pure parts of the reachability code, without the lab: the CGNAT verdict table, signal
builders, server names, NAT-PMP answers, IP_RECVERR data, the routing table (no root)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostcheck.collectors import CollectContext, reachability
from hostcheck.facts import Unknown
from hostcheck.netprobe import cgnat as cg
from hostcheck.netprobe.gateway import default_gateway_v4, parse_natpmp_response
from hostcheck.netprobe.hops import IP_RECVERR, Hop, parse_recverr
from hostcheck.netprobe.stun_servers import parse_server

LAB = ["198.51.100.0/24", "203.0.113.0/24"]


def sig(name: str, result: str) -> dict[str, str]:
    return cg.signal(name, result, "test")


NAT = sig("stun_mapped_address", "nat")


@pytest.mark.parametrize(
    "signals, verdict",
    [
        ([], "unknown"),
        ([NAT], "unknown"),
        ([sig("stun_mapped_address", "no-nat"), sig("hop_probe", "shared-address-hop")], "no"),
        ([sig("stun_mapped_address", "shared-address")], "yes"),
        ([NAT, sig("local_address", "shared-address")], "yes"),
        ([NAT, sig("router_natpmp", "shared-address")], "yes"),
        ([NAT, sig("hop_probe", "shared-address-hop")], "likely"),
        # A router's claim to hold the public address is contradicted by what lies beyond it:
        # the contradicted claim points at another NAT upstream, a heuristic of its own.
        ([NAT, sig("hop_probe", "shared-address-hop"), sig("router_upnp", "public-matches")], "yes"),
        ([NAT, sig("hop_probe", "private-upstream"), sig("router_upnp", "public-matches")], "likely"),
        ([NAT, sig("hop_probe", "claimed-address-hop"), sig("router_natpmp", "public-matches")], "likely"),
        ([NAT, sig("hop_probe", "claimed-address-hop"), sig("router_upnp", "public-contradicted")], "likely"),
        ([NAT, sig("hop_probe", "shared-address-hop"), sig("servers_agree", "different-addresses")], "yes"),
        ([NAT, sig("hop_probe", "shared-address-hop"), sig("router_upnp", "private")], "yes"),
        # UPnP and NAT-PMP read the same router: agreeing twice is one source, not two.
        ([NAT, sig("router_upnp", "private"), sig("router_natpmp", "private")], "likely"),
        ([NAT, sig("router_upnp", "public-matches")], "no"),
        # A public hop after the home router proves nothing: carrier NATs answer from public addresses.
        ([NAT, sig("hop_probe", "public-upstream")], "unknown"),
        ([NAT, sig("hop_probe", "public-upstream"), sig("router_upnp", "no-address")], "unknown"),
        # The host holds the public address itself: positive evidence.
        ([NAT, sig("local_address", "public-address")], "no"),
        # A carrier pool: the router reports one of the pool's addresses, a second server sees another.
        ([NAT, sig("router_natpmp", "public-matches"), sig("servers_agree", "different-addresses")], "yes"),
        ([sig("stun_mapped_address", "unknown"), sig("hop_probe", "public-upstream")], "unknown"),
        ([NAT, sig("router_upnp", "no-address"), sig("router_natpmp", "no-address")], "unknown"),
        ([NAT, sig("hop_probe", "private-upstream")], "unknown"),
    ],
)
def test_verdict_table(signals: list[dict[str, str]], verdict: str) -> None:
    assert cg.cgnat_verdict(signals) == verdict


names = st.sampled_from(sorted({n for n, _ in cg.VOTES} | {"ipv6", "other"}))
results = st.sampled_from(sorted({r for _, r in cg.VOTES} | {"unknown", "nat", "whatever"}))


@given(st.lists(st.tuples(names, results), max_size=8))
@settings(max_examples=300)
def test_verdict_is_total_and_yes_is_monotone(pairs: list[tuple[str, str]]) -> None:
    signals = [sig(n, r) for n, r in pairs]
    verdict = cg.cgnat_verdict(signals)
    assert verdict in ("yes", "likely", "no", "unknown")
    # Seeing a shared address directly can only ever make it "yes".
    assert cg.cgnat_verdict(signals + [sig("router_upnp", "shared-address")]) == "yes"


@pytest.mark.parametrize(
    "signals, verdict",
    [
        ([], "unknown"),
        ([NAT], "unknown"),
        ([sig("stun_mapped_address", "no-nat"), sig("hop_probe", "private-upstream")], "no"),
        ([NAT, sig("local_address", "public-address")], "no"),
        ([NAT, sig("router_upnp", "private")], "yes"),
        ([NAT, sig("router_natpmp", "private"), sig("hop_probe", "public-upstream")], "yes"),
        ([NAT, sig("hop_probe", "private-upstream"), sig("router_upnp", "no-address")], "yes"),
        ([NAT, sig("hop_probe", "private-upstream"), sig("router_upnp", "unknown")], "likely"),
        # A router that learnt the public address by STUN, yet a private router behind it.
        ([NAT, sig("hop_probe", "private-upstream"), sig("router_upnp", "public-matches")], "likely"),
        ([NAT, sig("router_upnp", "public-matches")], "no"),
        # The router is not the public edge, but what is beyond it is not known.
        ([NAT, sig("hop_probe", "claimed-address-hop"), sig("router_upnp", "public-matches")], "unknown"),
        ([NAT, sig("servers_agree", "different-addresses"), sig("router_upnp", "public-matches")], "unknown"),
        ([NAT, sig("hop_probe", "shared-address-hop")], "unknown"),
        ([NAT, sig("hop_probe", "public-upstream"), sig("router_natpmp", "no-address")], "unknown"),
    ],
)
def test_double_nat_table(signals: list[dict[str, str]], verdict: str) -> None:
    assert cg.double_nat_verdict(signals) == verdict


def test_stun_signal() -> None:
    local = ("192.168.1.10", 5000)
    assert cg.stun_signal(local, local, "s", None, LAB)["result"] == "no-nat"
    assert cg.stun_signal(("100.64.3.4", 1), local, "s", None, LAB)["result"] == "shared-address"
    assert cg.stun_signal(("198.51.100.2", 5000), local, "s", None, LAB)["result"] == "nat"
    assert cg.stun_signal(("198.51.100.2", 5000), local, "s", None, [])["result"] == "non-public"
    assert cg.stun_signal(None, None, "s", "no answer", LAB) == cg.signal(
        "stun_mapped_address", "unknown", "no answer"
    )


@pytest.mark.parametrize(
    "address, mapped, result",
    [
        (None, "198.51.100.2", "no-address"),
        ("100.64.0.2", "203.0.113.2", "shared-address"),
        ("10.0.0.2", "203.0.113.2", "private"),
        ("198.51.100.2", "198.51.100.2", "public-matches"),
        ("198.51.100.2", "203.0.113.2", "public-differs"),
        ("198.51.100.2", None, "public"),
    ],
)
def test_router_signal(address: str | None, mapped: str | None, result: str) -> None:
    assert cg.router_signal("router_upnp", address, "UPnP", mapped, LAB)["result"] == result


@pytest.mark.parametrize(
    "hops, result",
    [
        (
            [Hop(1, "192.168.1.1", False), Hop(2, "100.64.0.1", False), Hop(3, "203.0.113.10", True)],
            "shared-address-hop",
        ),
        ([Hop(1, "192.168.1.1", False), Hop(2, "198.51.100.1", False)], "public-upstream"),
        ([Hop(1, "192.168.1.1", False), Hop(2, "10.1.1.1", False)], "private-upstream"),
        ([Hop(1, "192.168.1.1", False)], "inconclusive"),
        ([], "no-answer"),
    ],
)
def test_hop_signal(hops: list[Hop], result: str) -> None:
    assert cg.hop_signal(hops, None, LAB)["result"] == result


def test_hop_answering_from_the_routers_claimed_address() -> None:
    hops = [Hop(1, "192.168.1.1", False), Hop(2, "198.51.100.2", False), Hop(3, "203.0.113.10", True)]
    assert cg.hop_signal(hops, None, LAB)["result"] == "public-upstream"
    assert cg.hop_signal(hops, None, LAB, ["198.51.100.2"])["result"] == "claimed-address-hop"
    # Hop 1 is the home router itself: its own address proves nothing.
    assert cg.hop_signal(hops[:1] + hops[2:], None, LAB, ["192.168.1.1"])["result"] == "inconclusive"


def _path(router_address: str, hops: list[tuple[int, str]], second_server_sees: str | None = None) -> dict:
    stun = [{"server": "s1", "mapped": "198.51.100.2:4000", "local": "192.168.1.10:5000"}]
    if second_server_sees:
        stun.append({"server": "s2", "mapped": f"{second_server_sees}:4001", "local": "192.168.1.10:5000"})
    return {
        "public_ranges": LAB,
        "stun": stun,
        "local_ipv4": "192.168.1.10",
        "router_upnp": {"address": router_address, "detail": "UPnP"},
        "router_natpmp": {"address": router_address, "detail": "NAT-PMP"},
        "hops": [{"ttl": t, "address": a, "reached": False} for t, a in hops] + [
            {"ttl": 9, "address": "203.0.113.10", "reached": True}
        ],
    }


@pytest.mark.parametrize(
    "path, cgnat, double_nat, contradiction",
    [
        # Nothing on the path contradicts the router: its claim is the positive evidence.
        (_path("198.51.100.2", [(1, "192.168.1.1"), (2, "198.51.100.1")]), "no", "no", None),
        # A router that learnt the carrier's address by STUN, behind a private-range router.
        (_path("198.51.100.2", [(1, "192.168.1.1"), (2, "10.0.0.1")]), "likely", "likely", "private-range"),
        # The carrier's NAT answers from the very address the home router claims.
        (_path("198.51.100.2", [(1, "192.168.1.1"), (2, "198.51.100.2")]), "likely", "unknown", "that very"),
        (_path("198.51.100.2", [(1, "192.168.1.1"), (2, "100.64.0.1")]), "yes", "unknown", "shared space"),
        # A carrier pool: a second server sees another of its addresses.
        (
            _path("198.51.100.2", [(1, "192.168.1.1"), (2, "198.51.100.1")], "198.51.100.3"),
            "yes",
            "unknown",
            "different addresses",
        ),
    ],
)
def test_router_claims_count_only_where_the_path_agrees(
    path: dict, cgnat: str, double_nat: str, contradiction: str | None
) -> None:
    signals = cg.signals_from_path(path)
    by_name = {s["name"]: s for s in signals}
    assert (cg.cgnat_verdict(signals), cg.double_nat_verdict(signals)) == (cgnat, double_nat)
    for name in ("router_upnp", "router_natpmp"):
        if contradiction is None:
            assert by_name[name]["result"] == "public-matches"
        else:
            assert by_name[name]["result"] == "public-contradicted"
            assert contradiction in by_name[name]["evidence"]


def test_servers_signal() -> None:
    assert cg.servers_signal([("a", ("1.1.1.1", 1)), ("b", ("1.1.1.1", 2))])["result"] == "same-address"
    assert (
        cg.servers_signal([("a", ("1.1.1.1", 1)), ("b", ("1.1.1.2", 1))])["result"] == "different-addresses"
    )
    assert cg.servers_signal([("a", ("1.1.1.1", 1)), ("b", None)])["result"] == "not-tested"


@pytest.mark.parametrize(
    "spec, parsed",
    [
        ("stun.example.org", ("stun.example.org", 3478)),
        ("stun.example.org:19302", ("stun.example.org", 19302)),
        ("203.0.113.10", ("203.0.113.10", 3478)),
        ("[2001:db8::1]:3479", ("2001:db8::1", 3479)),
        ("[2001:db8::1]", ("2001:db8::1", 3478)),
        ("2001:db8::1", ("2001:db8::1", 3478)),
    ],
)
def test_parse_server(spec: str, parsed: tuple[str, int]) -> None:
    assert parse_server(spec) == parsed


@pytest.mark.parametrize(
    "spec", ["", "host:0", "host:70000", "host:x", "[2001:db8::1", "[nothost]:1", "a b:1"]
)
def test_parse_server_rejects(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_server(spec)


def test_natpmp_answers() -> None:
    ok = struct.pack("!BBHI", 0, 128, 0, 1234) + socket.inet_aton("100.64.0.2")
    assert parse_natpmp_response(ok) == "100.64.0.2"
    assert parse_natpmp_response(struct.pack("!BBHI", 0, 128, 3, 1) + bytes(4)) is None  # network failure
    assert parse_natpmp_response(struct.pack("!BBHI", 0, 128, 0, 1) + bytes(4)) is None  # 0.0.0.0
    for bad in (
        ok[:11],
        b"\x01" + ok[1:],
        ok[:1] + b"\x81" + ok[2:],
        struct.pack("!BBHI", 0, 128, 2, 1) + bytes(4),
    ):
        with pytest.raises(ValueError):
            parse_natpmp_response(bad)


@given(st.binary(max_size=40))
def test_natpmp_parser_never_crashes(data: bytes) -> None:
    try:
        parse_natpmp_response(data)
    except ValueError:
        pass


def test_parse_recverr() -> None:
    ee = struct.pack("=IBBBBII", 113, 2, 11, 0, 0, 0, 0)
    offender = struct.pack("=HH4s8x", socket.AF_INET, 0, socket.inet_aton("100.64.0.1"))
    assert parse_recverr([(socket.IPPROTO_IP, IP_RECVERR, ee + offender)]) == ("100.64.0.1", 11, 0)
    local = struct.pack("=IBBBBII", 90, 1, 0, 0, 0, 0, 0)  # SO_EE_ORIGIN_LOCAL
    assert parse_recverr([(socket.IPPROTO_IP, IP_RECVERR, local + offender)]) is None
    assert parse_recverr([(socket.IPPROTO_IP, IP_RECVERR, b"short")]) is None


def test_default_gateway_from_route_table(tmp_path: Path) -> None:
    table = tmp_path / "route"
    table.write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
        "wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
        "eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
    )
    assert default_gateway_v4(str(table)) == "192.168.1.1"
    table.write_text("Iface\tDestination\tGateway\n")
    assert isinstance(default_gateway_v4(str(table)), Unknown)
    assert isinstance(default_gateway_v4(str(tmp_path / "missing")), Unknown)


def test_offline_collector_sends_nothing() -> None:
    facts = reachability.collect(CollectContext(offline=True))
    assert facts == reachability.offline_facts()
    assert all(isinstance(v, Unknown) for v in facts.values())


def test_collector_contract() -> None:
    assert reachability.SECTION == "network"
    assert reachability.NEEDS_NETWORK is True
    assert reachability.NETWORK_BUDGET_S < reachability.TIMEOUT <= 6.0
    assert reachability.DEFAULT_STUN_SERVERS and all(
        parse_server(s) for s in reachability.DEFAULT_STUN_SERVERS
    )


# -- ICMP errors and the server fallback, on loopback (no root, no lab) ------------------------


def _closed_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Echo:
    """A loopback STUN server answering Binding with the sender's address (no OTHER-ADDRESS)."""

    def __init__(self) -> None:
        from hostcheck.netprobe.stun_codec import CLASS_SUCCESS, decode_message, encode_message

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.addr = self.sock.getsockname()
        self.stop = False

        def run() -> None:
            while not self.stop:
                try:
                    data, src = self.sock.recvfrom(2048)
                except OSError:
                    continue
                tid = decode_message(data).transaction_id
                self.sock.sendto(encode_message(CLASS_SUCCESS, tid, {"XOR-MAPPED-ADDRESS": src}), src)

        import threading

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop = True
        self.thread.join(1)
        self.sock.close()


def test_icmp_port_unreachable_ends_a_transaction_at_once() -> None:
    import time

    from hostcheck.netprobe.stun_client import stun_binding

    started = time.monotonic()
    result = stun_binding(("127.0.0.1", _closed_udp_port()), deadline=started + 5)
    assert result.outcome is not None and result.outcome.unreachable
    assert "port unreachable (ICMP from 127.0.0.1)" in (result.error or "")
    assert result.outcome.sent == 1
    assert time.monotonic() - started < 0.4  # the schedule would wait 3 s


def test_discovery_falls_back_past_a_refusing_server_on_the_same_socket() -> None:
    import time

    from hostcheck.models import NatBehaviour
    from hostcheck.netprobe.discovery import discover_nat

    echo = _Echo()
    try:
        started = time.monotonic()
        dead = ("127.0.0.1", _closed_udp_port())
        disc = discover_nat([dead, echo.addr], deadline=started + 5)
    finally:
        echo.close()
    assert time.monotonic() - started < 0.5
    assert [a.server for a in disc.answers] == [dead, echo.addr]
    assert "port unreachable" in (disc.answers[0].error or "")
    assert disc.server == echo.addr and disc.mapped == disc.local
    # Mapped equals local: no NAT, so the mapping is trivially endpoint-independent.
    assert (disc.mapping, disc.mapping_method, disc.nat_present) == (NatBehaviour.ENDPOINT_INDEPENDENT, "two-servers", False)
    assert disc.filtering == "unknown" and "do not support RFC 5780" in (disc.reason or "")


def test_parse_icmp_error_reads_ipv6_offenders() -> None:
    from hostcheck.netprobe.stun_client import IPV6_RECVERR, SO_EE_ORIGIN_ICMP6, parse_icmp_error

    ee = struct.pack("=IBBBBII", 111, SO_EE_ORIGIN_ICMP6, 1, 4, 0, 0, 0)
    offender = struct.pack("=HHI", socket.AF_INET6, 0, 0) + socket.inet_pton(socket.AF_INET6, "2001:db8::7") + b"\0" * 4
    assert parse_icmp_error([(socket.IPPROTO_IPV6, IPV6_RECVERR, ee + offender)]) == ("2001:db8::7", 1, 4)
    assert parse_icmp_error([(socket.IPPROTO_IP, 99, ee + offender)]) is None
