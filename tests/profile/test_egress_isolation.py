"""Container egress isolation proven with real packets: a real Docker engine on an nspawn lab
host, probed from inside a container before the profile, after it, and after rollback.

The lab network gives the host a real "LAN": its subnet 10.77.I.0/24 and the hub namespace at
10.77.I.1, which stands in for the home router (a TCP and a UDP service, and a DNS server, as
many routers run), and at 10.77.I.3, a NAS the owner allows containers to reach
(firewall_container_lan_allowed). The hub also carries two addresses routed to it from the
host only: 198.51.100.I, the lab's "internet" (the same services), and 169.254.169.254, a
cloud metadata service. A service on the host itself stands for the host's own services. Nothing
here leaves the lab: the routes and addresses are inside the session's namespaces.

Before the profile every probe gets through (so the test proves the change, not the lab's
wiring); after it the LAN, the host and the metadata address are rejected while the internet,
DNS to a public resolver and a published port still work; after rollback everything gets
through again and /etc and /var/lib are back to the snapshot. The audit's ISO-1040 fails,
passes, fails in step.

IPv6: the lab has no IPv6 route (only link-local addresses on the veths), so the IPv6 half
of the ruleset is verified statically here (the rules in the loaded table) and by the
walk of the loaded ruleset in ISO-1040 (tests/test_container_egress.py).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.nspawn import LabHost
from tests.profile import play
from tests.profile.test_profile_lifecycle import IDLE_NOISE, PACKAGE_MANAGER_STATE, build_test_image

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(300)]

TCP_PORT, UDP_PORT, HOST_PORT, PUBLISHED = 18080, 18081, 18082, 8080
METADATA = "169.254.169.254"
ANSWER = "192.0.2.123"  # what the lab's DNS servers answer for every A query
AUDIT = f"{VENV}/bin/hostcheck audit --policy dedicated-host --offline --format json --timeout 60"
PROFILE_VARS = {"firewall_allowed_tcp_ports": [HOST_PORT], "firewall_forward_allowed_ports": [PUBLISHED]}


def profile_vars(host: LabHost) -> dict[str, Any]:
    return {**PROFILE_VARS, "firewall_container_lan_allowed": [f"{nas(host)}/32"]}


def nas(host: LabHost) -> str:
    return f"10.77.{host.index}.3"
# Docker's own state (containers come and go between snapshots) is not the profile's.
DOCKER_STATE = ("/var/lib/docker", "/var/lib/containerd")

# Runs in the hub namespace: TCP and UDP services and a DNS server on each given address (a
# UDP socket per address: a reply must come from the address the client asked).
SERVER = r"""
import socket, struct, sys, threading
tcp_port, udp_port, answer = int(sys.argv[1]), int(sys.argv[2]), socket.inet_aton(sys.argv[3])
addresses = sys.argv[4:]
def tcp():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", tcp_port)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(b"hello\n"); c.close()
def udp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, udp_port))
    while True:
        data, peer = s.recvfrom(512); s.sendto(data, peer)
def dns(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 53))
    while True:
        q, peer = s.recvfrom(512)
        end = 12
        while end < len(q) and q[end]:
            end += q[end] + 1
        qtype = struct.unpack("!H", q[end + 1:end + 3])[0] if end + 3 <= len(q) else 0
        question = q[12:end + 5]
        head = q[:2] + struct.pack("!HHHHH", 0x8180, 1, 1 if qtype == 1 else 0, 0, 0)
        rr = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + answer if qtype == 1 else b""
        s.sendto(head + question + rr, peer)
threading.Thread(target=tcp, daemon=True).start()
for a in addresses:
    threading.Thread(target=udp, args=(a,), daemon=True).start()
    threading.Thread(target=dns, args=(a,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# Runs inside a container: each probe with a timeout, the outcome as a word.
PROBE = r"""
import json, socket, struct, sys
out = {}
for name, kind, host, port in json.loads(sys.argv[1]):
    try:
        if kind == "tcp":
            s = socket.create_connection((host, port), 3); s.close(); out[name] = "open"
        elif kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.connect((host, port))
            s.send(b"ping"); out[name] = "reply" if s.recv(64) == b"ping" else "garbled"
        elif kind == "dns":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3); s.connect((host, 53))
            s.send(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05probe\x03lab\x04test\x00\x00\x01\x00\x01")
            r = s.recv(512); out[name] = socket.inet_ntoa(r[-4:]) if struct.unpack("!H", r[6:8])[0] else "empty"
        elif kind == "resolve":
            out[name] = socket.getaddrinfo(host, port, socket.AF_INET)[0][4][0]
    except socket.timeout:
        out[name] = "timeout"
    except OSError as exc:
        out[name] = f"error: {exc.strerror or exc}"
print(json.dumps(out))
"""


@dataclass
class Egress:
    host: LabHost
    probes: dict[str, dict[str, str]] = field(default_factory=dict)
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    snaps: dict[str, play.Snapshot] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


def targets(host: LabHost) -> list[tuple[str, str, str, int]]:
    router, internet = f"10.77.{host.index}.1", f"198.51.100.{host.index}"
    return [
        ("lan_tcp", "tcp", router, TCP_PORT), ("lan_udp", "udp", router, UDP_PORT),
        ("lan_dns", "dns", router, 53), ("metadata_tcp", "tcp", METADATA, TCP_PORT),
        ("nas_tcp", "tcp", nas(host), TCP_PORT), ("nas_udp", "udp", nas(host), UDP_PORT),
        ("host_tcp", "tcp", host.ip, HOST_PORT), ("host_gateway_tcp", "tcp", "172.17.0.1", HOST_PORT),
        ("internet_tcp", "tcp", internet, TCP_PORT), ("internet_udp", "udp", internet, UDP_PORT),
        ("internet_dns", "dns", internet, 53), ("resolve", "resolve", "probe.lab.test", 80),
    ]


def probe(host: LabHost) -> dict[str, str]:
    """All probes from one fresh container (its resolver: the lab's "internet" DNS), and a
    published port fetched from the LAN side (the hub)."""
    argv = shlex.quote(json.dumps(targets(host)))
    result = host.sudo(f"docker run --rm --dns 198.51.100.{host.index} labpy -c {shlex.quote(PROBE)} {argv}",
                       timeout=180)
    assert result.rc == 0, f"probe container failed: {result.stdout}{result.stderr}"
    out: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    fetched = host.outside(["curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                            f"http://{host.ip}:{PUBLISHED}/"], timeout=20)
    out["published_from_lan"] = fetched.stdout.strip() or f"curl rc={fetched.returncode}"
    out["host_from_lan"] = host.tcp_from_outside(HOST_PORT, timeout=3.0)
    return out


def audit(host: LabHost) -> dict[str, Any]:
    result = host.sudo(AUDIT, timeout=180)
    assert result.rc in (0, 3), f"audit failed rc={result.rc}: {result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    (policy,) = report["policies"]
    finding = next(f for f in policy["findings"] if f["id"] == "ISO-1040")
    risk = next(r for r in report["owner_risk"]["findings"] if r["id"] == "ISO-1040")
    return {"finding": finding, "rating": report["owner_risk"]["rating"], "risk_row": risk}


def start_web(host: LabHost) -> None:
    # restart policy: the profile restarts the engine with live-restore only then switched on
    host.sudo(f"docker run -d --restart always --name web -p {PUBLISHED}:80 labpy -m http.server 80",
              check=True, timeout=120)
    time.sleep(2)


@pytest.fixture(scope="module")
def egress(lab, tmp_path_factory) -> Iterator[Egress]:
    with play.docker_capable_env():
        host = lab.start_hosts(1, nspawn_args=play.DOCKER_NSPAWN_ARGS)[0]
    life = Egress(host)
    tmp = tmp_path_factory.mktemp("egress")
    internet = f"198.51.100.{host.index}"
    hub_addrs = [(f"{internet}/32", "lo"), (f"{METADATA}/32", "lo"), (f"{nas(host)}/32", f"ve-{host.index}")]
    server: subprocess.Popen[str] | None = None
    try:
        # ---- the lab's LAN, internet and metadata service ------------------------------
        for addr, dev in hub_addrs:
            assert lab.hub_exec(["ip", "addr", "add", addr, "dev", dev]).returncode == 0
        server = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{lab.hub}", sys.executable, "-I", "-S", "-c", SERVER,
             str(TCP_PORT), str(UDP_PORT), ANSWER, f"10.77.{host.index}.1", nas(host), internet, METADATA],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        host.sudo(f"ip route add {internet}/32 via 10.77.{host.index}.1 && "
                  f"ip route add {METADATA}/32 via 10.77.{host.index}.1", check=True)

        # ---- a default Docker host: the engine as Debian installs it ---------------------
        install_hostcheck(host, build_wheelhouse(tmp / "wheelhouse"))
        host.sudo("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                  "--no-install-recommends docker.io >/dev/null", check=True, timeout=900)
        build_test_image(host)
        host.sudo(f"setsid nohup python3 -m http.server {HOST_PORT} >/dev/null 2>&1 < /dev/null &", check=True)
        start_web(host)
        life.probes["before"] = probe(host)
        life.audits["before"] = audit(host)
        life.snaps["before"] = play.snapshot(host)

        # ---- the profile ---------------------------------------------------------------
        life.plays["converge"] = play.run_playbook(host.inventory_path, "site.yml", extra_vars=profile_vars(host))
        assert life.plays["converge"].rc == 0, life.plays["converge"].describe()
        life.probes["profiled"] = probe(host)
        life.audits["profiled"] = audit(host)
        life.facts["ruleset"] = host.sudo("nft list table inet hostcheck").stdout
        life.facts["ip_forward"] = host.sudo("sysctl -n net.ipv4.ip_forward").stdout.strip()

        # ---- rollback ------------------------------------------------------------------
        host.sudo("docker rm -f web", check=True, timeout=60)
        life.plays["rollback"] = play.run_playbook(host.inventory_path, "rollback.yml")
        assert life.plays["rollback"].rc == 0, life.plays["rollback"].describe()
        life.snaps["rolled_back"] = play.snapshot(host)
        life.facts["tables_after_rollback"] = host.sudo("nft list tables").stdout
        start_web(host)
        life.probes["rolled_back"] = probe(host)
        life.audits["rolled_back"] = audit(host)
        yield life
    finally:
        if server is not None:
            server.kill()
            server.wait(timeout=10)
        for addr, dev in hub_addrs:
            lab.hub_exec(["ip", "addr", "del", addr, "dev", dev])
        lab.stop_hosts([host])


OPEN = {"lan_tcp": "open", "lan_udp": "reply", "nas_tcp": "open", "nas_udp": "reply", "lan_dns": ANSWER,
        "metadata_tcp": "open", "host_tcp": "open", "host_gateway_tcp": "open", "internet_tcp": "open",
        "internet_udp": "reply", "internet_dns": ANSWER, "resolve": ANSWER, "published_from_lan": "200",
        "host_from_lan": "open"}
PRIVATE = ("lan_tcp", "lan_udp", "lan_dns", "metadata_tcp", "host_tcp", "host_gateway_tcp")
PUBLIC = ("internet_tcp", "internet_udp", "internet_dns", "resolve", "published_from_lan", "host_from_lan")


def test_before_the_profile_every_probe_gets_through(egress: Egress) -> None:
    """The lab's wiring works: without the profile a container reaches the LAN, the host and
    the metadata address (what the issue measured on a default Docker host)."""
    assert egress.probes["before"] == OPEN, egress.probes


def test_profile_blocks_the_lan_the_host_and_metadata(egress: Egress) -> None:
    got = egress.probes["profiled"]
    blocked = {name: got[name] for name in PRIVATE}
    # rejected with ICMP admin-prohibited: the workload fails fast instead of hanging
    assert all(v.startswith("error") for v in blocked.values()), blocked


def test_profile_keeps_the_internet_dns_and_published_ports(egress: Egress) -> None:
    got = egress.probes["profiled"]
    assert {name: got[name] for name in PUBLIC} == {name: OPEN[name] for name in PUBLIC}, egress.probes


def test_allowlisted_lan_address_stays_reachable(egress: Egress) -> None:
    """firewall_container_lan_allowed opens exactly the NAS, not its neighbour the router."""
    got = egress.probes["profiled"]
    assert (got["nas_tcp"], got["nas_udp"]) == ("open", "reply"), got
    assert f"{nas(egress.host)}" in egress.facts["ruleset"]


def test_ruleset_covers_ipv6_and_keeps_forwarding(egress: Egress) -> None:
    ruleset = egress.facts["ruleset"]
    assert "ip6 daddr @container_private_v6 reject" in ruleset
    # nft merges fe80::/10, fec0::/10 and ff00::/8 into one range when it prints the set
    for prefix in ("fc00::/7", "fe80::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "10.0.0.0/8", "100.64.0.0/10",
                   "169.254.0.0/16", "224.0.0.0/3"):
        assert prefix in ruleset, prefix
    assert egress.facts["ip_forward"] == "1"


def test_rollback_brings_every_probe_back(egress: Egress) -> None:
    assert egress.probes["rolled_back"] == OPEN, egress.probes
    assert "hostcheck" not in egress.facts["tables_after_rollback"]


def test_rollback_restores_the_snapshot(egress: Egress) -> None:
    diff = play.file_diff(egress.snaps["before"], egress.snaps["rolled_back"],
                          ignore=PACKAGE_MANAGER_STATE + IDLE_NOISE + DOCKER_STATE)
    assert diff == {}
    assert egress.snaps["before"].packages == egress.snaps["rolled_back"].packages


def test_audit_iso_1040_follows_the_ruleset(egress: Egress) -> None:
    """Fails on a default Docker host (owner risk HIGH), passes once profiled, fails again
    after rollback; the finding names the role variable that fixes it."""
    before, profiled, after = (egress.audits[k]["finding"] for k in ("before", "profiled", "rolled_back"))
    assert before["status"] == "fail", before
    assert "169.254.169.254" in json.dumps(before)
    assert "firewall_container_egress_isolation" in json.dumps(before)
    assert profiled["status"] == "pass", profiled
    assert after["status"] == "fail", after
    assert egress.audits["before"]["risk_row"]["level"] == "high"
    assert egress.audits["before"]["risk_row"]["status"] == "warn"
    assert egress.audits["before"]["rating"] == "high"
    assert egress.audits["profiled"]["risk_row"]["status"] == "pass"
