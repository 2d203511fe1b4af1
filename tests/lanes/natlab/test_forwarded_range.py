"""The forwarded range as the platform tests it, in the NAT lab: a home router that forwards
only part of the agent's range (and part of that over TCP only), probed from the lab's
internet; then the same probe from inside the LAN (a probe server on the router's LAN side,
and one reached through the router's hairpin NAT), which must never count as outside."""

from __future__ import annotations

import json
from pathlib import Path

import natlab_builder as nb
import pytest

from hostcheck.checks import load_registry
from hostcheck.judge import run_check
from hostcheck.netprobe.probe_protocol import DEFAULT_MAX_PORTS

pytestmark = [pytest.mark.root, pytest.mark.natlab]

REGISTRY = load_registry()
FIRST, LAST = nb.FORWARDED_PORT, nb.FORWARDED_PORT + 63  # below the host's ephemeral ports
BOTH_UP_TO = FIRST + 31  # the router forwards TCP and UDP up to here,
TCP_UP_TO = FIRST + 47  # TCP alone up to here, and nothing above
FORWARDS = (("tcp", FIRST, TCP_UP_TO), ("udp", FIRST, BOTH_UP_TO))
INSIDE_PORT = nb.PROBE_SERVER_PORT + 2
HAIRPIN_PORT = nb.PROBE_SERVER_PORT + 3


def sample() -> list[int]:
    """First, last and evenly spaced ports between: as many as one request carries, TCP and UDP."""
    count = DEFAULT_MAX_PORTS // 2
    return [FIRST + round(i * (LAST - FIRST) / (count - 1)) for i in range(count)]


def forwarded(port: int, proto: str) -> bool:
    return any(p == proto and first <= port <= last for p, first, last in FORWARDS)


def collect(natlab: nb.NatLab, url: str, agent_file: Path) -> dict:
    args = nb.collect_args(probe_url=url, probe_token=nb.PROBE_TOKEN, agent_range_file=str(agent_file))
    return natlab.run_host("collect", args)["result"]


def judge(facts: dict, check_id: str, threshold: object = None) -> object:
    return run_check(REGISTRY[check_id], {"network": facts}, threshold)


def audit(natlab: nb.NatLab, url: str) -> dict:
    """``hostcheck audit -p vast --format json`` in the host namespace, as a user runs it."""
    assert natlab.tmp is not None
    token_file = natlab.tmp / "range-token"
    token_file.write_text(nb.PROBE_TOKEN)
    token_file.chmod(0o600)
    argv = [nb.PYTHON, "-m", "hostcheck.cli", "audit", "--format", "json", "-p", "vast", "--probe", url,
            "--token-file", str(token_file), "--insecure-http", "--port-range", f"{FIRST}-{LAST}"]
    for server in nb.LAB_STUN_SERVERS:
        argv += ["--stun-server", server]
    for cidr in nb.PUBLIC_RANGES:
        argv += ["--public-range", cidr]
    proc = natlab.exec("host", argv, check=False, timeout=90)
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_audit_names_the_ports_a_shrunk_tcp_only_forward_lost(natlab: nb.NatLab) -> None:
    natlab.set_home("masquerade", firewall=True, forwards=FORWARDS)
    report = audit(natlab, f"http://{nb.INET_IP}:{nb.PROBE_SERVER_PORT}")
    network = report["facts"]["network"]

    # This machine has no agent range file, so the owner's --port-range is the range.
    assert network["port_range"] == {"first": FIRST, "last": LAST, "count": LAST - FIRST + 1, "source": "owner"}
    inbound = network["inbound"]
    assert inbound["probed"] is True and inbound["seen_from"] == "outside", inbound
    results = {(p["port"], p["proto"]): p["result"] for p in inbound["ports"]}
    expected = {(p, proto): "reachable" if forwarded(p, proto) else "unreachable"
                for p in sample() for proto in ("tcp", "udp")}
    assert results == expected

    finding = {f["id"]: f for f in report["policies"][0]["findings"]}["NET-1130"]
    missed_tcp = [p for p in sample() if not forwarded(p, "tcp")]
    missed_udp = [p for p in sample() if not forwarded(p, "udp")]
    assert finding["status"] == "warn"  # a risk on Vast: its TCP-and-UDP rule is in a draft page
    assert finding["measured"] == f"{sum(v == 'reachable' for v in expected.values())} of {len(expected)} reached"
    assert (f"not reached from outside: TCP {', '.join(map(str, missed_tcp))}; "
            f"UDP {', '.join(map(str, missed_udp))};") in finding["detail"]
    assert f"{FIRST}-{LAST} forwarded, TCP and UDP" in finding["detail"]


def test_inside_the_lan_a_success_never_counts(natlab: nb.NatLab, tmp_path: Path) -> None:
    """A probe server on the LAN side reaches every port directly; one reached through the
    router's hairpin NAT sees the router's LAN address. Both are labelled inside, judged unknown."""
    agent_file = tmp_path / "host_port_range"
    agent_file.write_text(f"{FIRST}-{LAST}\n")
    natlab.set_home("masquerade", firewall=True, hairpin=True, forwards=FORWARDS)
    lan_url = natlab.start_probe_server(nb.PROBE_TOKEN, bind=nb.HOME_LAN_IP, port=INSIDE_PORT, name="lan-probe",
                                        role="home", rate_per_min=1000)
    natlab.start_probe_server(nb.PROBE_TOKEN, bind="0.0.0.0", port=HAIRPIN_PORT, name="hairpin-probe",
                              role="host", rate_per_min=1000)
    try:
        lan = collect(natlab, lan_url, agent_file)
        hairpin = collect(natlab, f"http://{natlab.home_wan_ip}:{HAIRPIN_PORT}", agent_file)
    finally:
        natlab.stop("lan-probe")
        natlab.stop("hairpin-probe")

    assert lan["inbound"]["peer"] == nb.HOST_IP and lan["inbound"]["seen_from"] == "inside"
    assert {p["result"] for p in lan["inbound"]["ports"]} == {"reachable"}  # even ports never forwarded
    assert hairpin["inbound"]["peer"] == nb.HOME_LAN_IP and hairpin["inbound"]["seen_from"] == "inside"
    for facts in (lan, hairpin):
        for outcome in (judge(facts, "NET-1130"), judge(facts, "NET-1045", 1)):
            assert outcome.status == "unknown" and "inside the LAN" in outcome.detail, outcome
