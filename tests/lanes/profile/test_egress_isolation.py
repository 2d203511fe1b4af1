"""Container egress isolation proven with real packets: a real Docker engine on an nspawn lab
host, probed from inside a container before the profile, after it, and after rollback.

The lab network gives the host a real "LAN": its subnet 10.77.I.0/24 and the hub namespace at
10.77.I.1, which stands in for the home router (a TCP and a UDP service, and a DNS server, as
many routers run), and at 10.77.I.3, a NAS the owner allows containers to reach
(firewall_container_lan_allowed). The hub also carries two addresses routed to it from the
host only: 198.51.100.I, the lab's "internet" (the same services), and 169.254.169.254, a
cloud metadata service. A service on the host itself stands for the host's own services. Nothing
here leaves the lab: the routes and addresses are inside the session's namespaces.
The profile is site.yml without host_baseline's own settings
(play.BASELINE_PROVEN_ELSEWHERE): no probe here depends on them.

Before the profile every probe gets through (so the test proves the change, not the lab's
wiring); after it the LAN, the host and the metadata address are rejected while the internet,
DNS to a public resolver and a published port still work; after rollback everything gets
through again and /etc and /var/lib are back to the snapshot. The audit's ISO-1040 fails,
passes, fails in step.

IPv6: the host-hub link also carries a ULA prefix (fd77:I::/64, the LAN's), the hub a
documentation-range "internet" address (2001:db8:I::1) and a route back to the containers'
IPv6 network, and Docker an IPv6 network (fd78:I::/64, no NAT66, as Docker 20.10 runs it).
From a container on it: the LAN's ULA, the host's own ULA address, its gateway, its
link-local address on the bridge and the all-nodes multicast group go from reachable to
rejected (multicast: dropped, no ICMP error answers a multicast packet) while the IPv6
internet stays reachable (neighbour discovery on the bridge is accepted before the bridge's
reject), and everything comes back after rollback. ISO-1040's walk of the recorded ruleset
gives the same verdicts as the packets, for its own representative destinations and for the
lab's actual addresses.

Runtime state: Docker's userland-proxy off (the profile's choice) makes dockerd set
route_localnet=1 on its bridges. A container with Docker's default capabilities sends a raw
SYN to 127.0.0.1 through its bridge, to a service that listens only on the host's loopback:
dropped before the profile (a martian), dropped by the firewall under the profile (ISO-1060
passes on the walk), dropped again after rollback, because rollback put each bridge's
route_localnet back; the runtime snapshot (every interface's sysctls, both firewall
backends' rules, bridges, addresses, routes) equals the one taken before the profile. The
same holds for a network created while the profile is on (a bridge the manifest never saw,
under a name the network gave it):
rollback gives it route_localnet 0 and takes dockerd's `--src-type LOCAL` masquerade rule for
it away. Controls: before the profile, route_localnet=1 set by hand on docker0 lets the same
SYN get its SYN-ACK (so a timeout means the kernel or a rule dropped it); with
firewall_container_egress_isolation false (the firewall role alone, re-run) the 127/8 drop is
the only rule between the SYN and a port the input chain accepts: the SYN to 127.0.0.1 on that
port times out while the same SYN to the gateway address gets its SYN-ACK.

The rulesets of tests/snapshots/nft/ that tests/unit/checks/test_container_egress.py walks are this lab's:
`nft -j list ruleset` of the profiled host (Docker's chains included) and of the host with
egress isolation off. The lab test fails when the template no longer renders them (addresses
aside); HOSTCHECK_RECORD_NFT=tests/snapshots/nft writes them anew.

Owner risk: the audit names a host-network container and one sharing the host's PID and IPC
namespaces and Docker's socket (ISO-1050); --privileged itself cannot start on an nspawn host.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from hostcheck.firewall.egress import Probe, loopback_walk
from hostcheck.firewall.egress import judge as egress_walk
from hostcheck.firewall.egress import walk as walk_probe
from hostcheck.firewall.ruleset import Ruleset, parse_nft_ruleset
from tests.lab import timing
from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.nspawn import LabHost
from tests.lanes.profile import play
from tests.lanes.profile.test_profile_lifecycle import IDLE_NOISE, PACKAGE_MANAGER_STATE, build_test_image

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(480)]

TCP_PORT, UDP_PORT, HOST_PORT, PUBLISHED, LOOPBACK_PORT = 18080, 18081, 18082, 8080, 18083
METADATA = "169.254.169.254"
ANSWER = "192.0.2.123"  # what the lab's DNS servers answer for every A query
AUDIT = f"{VENV}/bin/hostcheck audit --policy dedicated-host --offline --format json --timeout 60"
PROFILE_VARS = {"firewall_allowed_tcp_ports": [HOST_PORT], "firewall_forward_allowed_ports": [PUBLISHED]}
ALL_NODES = "ff02::1"
NFT_SNAPSHOTS = {"profiled": "docker-profiled.json", "no_isolation": "docker-profiled-no-isolation.json"}
NFT_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "snapshots", "nft")


def profile_vars(host: LabHost) -> dict[str, Any]:
    return {**play.BASELINE_PROVEN_ELSEWHERE, **PROFILE_VARS, "firewall_container_lan_allowed": [f"{nas(host)}/32"]}


def nas(host: LabHost) -> str:
    return f"10.77.{host.index}.3"


def lan6(host: LabHost, last: int) -> str:
    """The LAN's ULA prefix on the host-hub link: ::1 the hub (router), ::2 the host."""
    return f"fd77:{host.index}::{last}"


def internet6(host: LabHost) -> str:
    return f"2001:db8:{host.index}::1"


def containers6(host: LabHost) -> str:
    return f"fd78:{host.index}::/64"


# Docker's own state (containers come and go between snapshots) is not the profile's.
DOCKER_STATE = ("/var/lib/docker", "/var/lib/containerd")

# Runs in the hub namespace: TCP and UDP services and a DNS server on each given address (a
# UDP socket per address: a reply must come from the address the client asked).
SERVER = r"""
import socket, struct, sys, threading
tcp_port, udp_port, answer = int(sys.argv[1]), int(sys.argv[2]), socket.inet_aton(sys.argv[3])
addresses = sys.argv[4:]
def tcp(family=socket.AF_INET, bind="0.0.0.0"):
    s = socket.socket(family); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((bind, tcp_port)); s.listen(16)
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
threading.Thread(target=tcp, args=(socket.AF_INET6, "::"), daemon=True).start()
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
        elif kind == "multicast6":
            # any host on the link may answer, from its own unicast address: no connect()
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.settimeout(3)
            s.sendto(b"ping", (host, port, 0, socket.if_nametoindex("eth0")))
            out[name] = "reply" if s.recvfrom(64)[0] == b"ping" else "garbled"
    except socket.timeout:
        out[name] = "timeout"
    except OSError as exc:
        out[name] = f"error: {exc.strerror or exc}"
print(json.dumps(out))
"""


# Runs inside a container with Docker's default capabilities (CAP_NET_RAW): a TCP SYN built by
# hand and sent on the container's eth0 to its gateway's MAC, addressed to argv[1]:argv[2]
# (127.0.0.1 is the container's own loopback to its kernel, so only a raw frame takes it to
# the host). What came back within 3 s: "syn-ack", "rst", "icmp type T code C" or "timeout".
RAW_SYN = r"""
import random, socket, struct, sys, time
dst, port = sys.argv[1], int(sys.argv[2])
def csum(b):
    b += b"\0" * (len(b) % 2)
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
for line in open("/proc/net/route").read().splitlines()[1:]:
    f = line.split()
    if f[1] == "00000000":
        dev, gw = f[0], socket.inet_ntoa(struct.pack("<L", int(f[2], 16)))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect((gw, 9)); src = u.getsockname()[0]
u.send(b"arp")  # resolves the gateway's MAC
mac = None
for _ in range(20):
    for line in open("/proc/net/arp").read().splitlines()[1:]:
        f = line.split()
        if f[0] == gw and f[3] != "00:00:00:00:00:00":
            mac = bytes.fromhex(f[3].replace(":", ""))
    if mac: break
    time.sleep(0.1)
own = bytes.fromhex(open("/sys/class/net/%s/address" % dev).read().strip().replace(":", ""))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800)); s.bind((dev, 0x0800))
sport, seq = random.randint(20000, 60000), random.randint(0, 2**31)
tcp = struct.pack("!HHLLBBHHH", sport, port, seq, 0, 5 << 4, 0x02, 64240, 0, 0)
pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), random.randint(0, 65535), 0x4000, 64, 6, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
s.send(mac + own + b"\x08\x00" + ip + tcp)
s.settimeout(0.2); deadline = time.time() + 3; out = "timeout"
while time.time() < deadline and out == "timeout":
    try:
        p = s.recv(4096)[14:]
    except socket.timeout:
        continue
    if len(p) < 40 or p[16:20] != socket.inet_aton(src):
        continue
    ihl = (p[0] & 15) * 4
    if p[9] == 6 and p[12:16] == socket.inet_aton(dst) and struct.unpack("!HH", p[ihl:ihl + 4]) == (port, sport):
        flags = p[ihl + 13]
        out = "syn-ack" if flags & 0x12 == 0x12 else "rst" if flags & 0x04 else "tcp flags %#x" % flags
    elif p[9] == 1 and p[ihl] in (3, 11, 12):
        out = "icmp type %d code %d" % (p[ihl], p[ihl + 1])
print(out)
"""


@dataclass
class Egress:
    host: LabHost
    probes: dict[str, dict[str, str]] = field(default_factory=dict)
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    snaps: dict[str, play.Snapshot] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    runtime: dict[str, dict[str, Any]] = field(default_factory=dict)
    bridge_v6: str = ""
    bridge_new: str = ""


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
    with added_cost("IPv6 and raw SYN probes"):
        out.update(probe6(host))
        out["loopback_syn"] = raw_syn(host, "127.0.0.1", LOOPBACK_PORT)
        out["gateway_syn"] = raw_syn(host, "172.17.0.1", HOST_PORT)
        # The host fetches the published port at its own LAN address: the web container logs
        # the source it saw, the host's address, or the bridge's where Docker masquerades
        # traffic from the host's own addresses (--src-type LOCAL, with userland-proxy off).
        fetch = f"import urllib.request; urllib.request.urlopen('http://{host.ip}:{PUBLISHED}/', timeout=5).read()"
        seen = host.sudo(f"python3 -c {shlex.quote(fetch)} && sleep 0.5 && docker logs --tail 1 web 2>&1", timeout=60)
        out["host_to_published_source"] = seen.stdout.split()[0] if seen.rc == 0 and seen.stdout.split() else seen.stderr
    return out


def raw_syn(host: LabHost, dst: str, port: int, network: str = "bridge") -> str:
    """What a hand-built SYN to ``dst``:``port`` from a container on ``network`` got back."""
    result = host.sudo(f"docker run --rm --network {network} labpy -c {shlex.quote(RAW_SYN)} {dst} {port}",
                       timeout=120)
    assert result.rc == 0, f"raw SYN container failed: {result.stdout}{result.stderr}"
    return result.stdout.strip().splitlines()[-1]


def bridge_of(host: LabHost, network: str) -> str:
    net_id = host.sudo(f"docker network inspect -f '{{{{.Id}}}}' {network}", check=True).stdout.strip()
    return f"br-{net_id[:12]}"


def gateway_of(host: LabHost, network: str) -> str:
    template = "{{range .IPAM.Config}}{{.Gateway}} {{end}}"
    return host.sudo(f"docker network inspect -f '{template}' {network}", check=True).stdout.split()[0]


def bridge_state(host: LabHost, bridge: str) -> dict[str, Any]:
    """The bridge's route_localnet and whether dockerd's masquerade rule for traffic from the
    host's own addresses (userland-proxy off) names it."""
    value = host.sudo(f"cat /proc/sys/net/ipv4/conf/{bridge}/route_localnet", check=True).stdout.strip()
    rules = host.sudo("iptables -w -t nat -S POSTROUTING", check=True).stdout.splitlines()
    local = any(f"-o {bridge} " in f"{line} " and "--src-type LOCAL" in line and "MASQUERADE" in line
                for line in rules)
    return {"route_localnet": value, "masquerade_local": local}


def nft_document(text: str) -> dict[str, Any]:
    """`nft -j list ruleset` as stored in tests/snapshots/nft/: counters zeroed (they only
    count this run's packets)."""
    document: dict[str, Any] = json.loads(text)
    for item in document["nftables"]:
        for expr in item.get("rule", {}).get("expr", []):
            if isinstance(expr, dict) and isinstance(expr.get("counter"), dict):
                expr["counter"] = {"packets": 0, "bytes": 0}
    return document


def template_shape(document: dict[str, Any]) -> list[Any]:
    """The table inet hostcheck as the firewall template shapes it: its sets (without their
    elements), chains and rules in order; handles left out and every address (they depend on
    the lab host's index and networks) written ADDR."""
    def addressish(value: Any) -> bool:
        if isinstance(value, dict):
            return set(value) in ({"prefix"}, {"range"}) and addressish(
                value.get("prefix", {}).get("addr") if "prefix" in value else value["range"][0])
        try:
            ipaddress.ip_network(value, strict=False)
        except (TypeError, ValueError):
            return False
        return isinstance(value, str)

    def norm(value: Any) -> Any:
        if addressish(value):
            return "ADDR"
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            if "set" in value and isinstance(value["set"], list):
                return {"set": sorted({json.dumps(norm(v), sort_keys=True) for v in value["set"]})}
            return {k: norm(v) for k, v in value.items() if k not in ("handle", "elem")}
        return value

    items = [item for item in document["nftables"]
             if any(isinstance(item.get(k), dict) and item[k].get("table") == "hostcheck" for k in ("set", "chain", "rule"))]
    return [norm(item) for item in items]


def settle_bridges(host: LabHost) -> None:
    """A container on each bridge once, then none: a bridge's link-local address and IPv6
    prefix route follow its first port coming up and its last going down (Docker's state, not
    the profile's), so both snapshots see bridges in that same state."""
    for network in ("bridge", "labv6"):
        host.sudo(f"docker run --rm --network {network} labpy -c pass", check=True, timeout=120)


@contextmanager
def added_cost(name: str) -> Iterator[None]:
    """Time a part of this module that isolation at runtime added (IPv6, loopback, runtime
    snapshots, stand-ins): recorded as a lab step, so the run's report shows what it costs."""
    started = time.monotonic()
    try:
        yield
    finally:
        timing.record("step", f"egress (runtime isolation): {name}", time.monotonic() - started)


def targets6(host: LabHost, bridge: str) -> list[tuple[str, str, str, int]]:
    link_local = host.sudo(f"ip -6 -o addr show dev {bridge} scope link", check=True).stdout.split()[3].split("/")[0]
    return [
        ("v6_lan_ula_tcp", "tcp", lan6(host, 1), TCP_PORT), ("v6_host_ula_tcp", "tcp", lan6(host, 2), HOST_PORT),
        ("v6_host_gateway_tcp", "tcp", containers6(host).replace("::/64", "::1"), HOST_PORT),
        ("v6_host_link_local_tcp", "tcp", f"{link_local}%eth0", HOST_PORT),
        ("v6_multicast_udp", "multicast6", ALL_NODES, UDP_PORT),
        ("v6_internet_tcp", "tcp", internet6(host), TCP_PORT),
    ]


def probe6(host: LabHost) -> dict[str, str]:
    """The IPv6 probes, from a fresh container on the IPv6 network."""
    bridge = v6_bridge(host)
    argv = shlex.quote(json.dumps(targets6(host, bridge)))
    result = host.sudo(f"docker run --rm --network labv6 labpy -c {shlex.quote(PROBE)} {argv}", timeout=180)
    assert result.rc == 0, f"IPv6 probe container failed: {result.stdout}{result.stderr}"
    out: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def v6_bridge(host: LabHost) -> str:
    return bridge_of(host, "labv6")


def audit(host: LabHost) -> dict[str, Any]:
    result = host.sudo(AUDIT, timeout=180)
    assert result.rc in (0, 3), f"audit failed rc={result.rc}: {result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    (policy,) = report["policies"]
    finding = next(f for f in policy["findings"] if f["id"] == "ISO-1040")
    risk = next(r for r in report["owner_risk"]["findings"] if r["id"] == "ISO-1040")
    rows = {r["id"]: r for r in report["owner_risk"]["findings"]}
    return {"finding": finding, "rating": report["owner_risk"]["rating"], "risk_row": risk, "rows": rows,
            "facts": report["facts"]}


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
    hub_v6: list[list[str]] = []
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
        # IPv6: the LAN's ULA on the host-hub link, the "internet" behind the hub, and the
        # hub's way back to the containers' IPv6 network (Docker 20.10 does no NAT66)
        for argv in (["ip", "-6", "addr", "add", f"{lan6(host, 1)}/64", "dev", f"ve-{host.index}", "nodad"],
                     ["ip", "-6", "addr", "add", f"{internet6(host)}/128", "dev", "lo"],
                     ["ip", "-6", "route", "add", containers6(host), "via", lan6(host, 2)]):
            assert lab.hub_exec(argv).returncode == 0, argv
            hub_v6.append(argv)
        host.sudo(f"ip -6 addr add {lan6(host, 2)}/64 dev host0 nodad && "
                  f"ip -6 route add {internet6(host)}/128 via {lan6(host, 1)} && "
                  "sysctl -qw net.ipv6.conf.all.forwarding=1", check=True)

        # ---- a default Docker host: the engine as Debian installs it ---------------------
        install_hostcheck(host, build_wheelhouse(tmp / "wheelhouse"))
        host.sudo("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                  "--no-install-recommends docker.io >/dev/null", check=True, timeout=900)
        build_test_image(host)
        # the host's own service on every address (IPv4 and IPv6), and one on its loopback only
        host.sudo(f"setsid nohup python3 -m http.server --bind :: {HOST_PORT} >/dev/null 2>&1 < /dev/null &", check=True)
        host.sudo(f"setsid nohup python3 -m http.server --bind 127.0.0.1 {LOOPBACK_PORT} >/dev/null 2>&1 < /dev/null &",
                  check=True)
        # a UDP echo on every address, multicast groups the host belongs to included
        echo = (f"import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(('::', {UDP_PORT}))\n"
                "while True:\n    d, p = s.recvfrom(512); s.sendto(d, p)")
        host.sudo(f"setsid nohup python3 -c {shlex.quote(echo)} >/dev/null 2>&1 < /dev/null &", check=True)
        with added_cost("IPv6 network and runtime snapshot"):
            host.sudo(f"docker network create --ipv6 --subnet {containers6(host)} labv6 >/dev/null", check=True,
                      timeout=60)
            life.bridge_v6 = v6_bridge(host)
            # Rollback restarts the engine on the owner's configuration: the state to compare
            # with is that of an engine restarted on it (the order dockerd writes its rules in)
            host.sudo("systemctl restart docker", check=True, timeout=120)
            settle_bridges(host)
            life.runtime["before"] = play.runtime_snapshot(host)
        start_web(host)
        life.probes["before"] = probe(host)
        life.audits["before"] = audit(host)
        life.snaps["before"] = play.snapshot(host)
        # positive control: route_localnet=1 and no firewall, the loopback SYN gets its SYN-ACK
        with added_cost("loopback controls"):
            host.sudo("sysctl -qw net.ipv4.conf.docker0.route_localnet=1", check=True)
            try:
                life.facts["control_loopback_syn"] = raw_syn(host, "127.0.0.1", LOOPBACK_PORT)
            finally:
                host.sudo("sysctl -qw net.ipv4.conf.docker0.route_localnet=0", check=True)

        # ---- the profile ---------------------------------------------------------------
        life.plays["converge"] = play.run_playbook(host.inventory_path, "site.yml", extra_vars=profile_vars(host))
        assert life.plays["converge"].rc == 0, life.plays["converge"].describe()
        life.probes["profiled"] = probe(host)
        life.audits["profiled"] = audit(host)
        life.facts["ruleset"] = host.sudo("nft list table inet hostcheck").stdout
        life.facts["ip_forward"] = host.sudo("sysctl -n net.ipv4.ip_forward").stdout.strip()
        life.facts["nft_profiled"] = host.sudo("nft -j list ruleset", check=True).stdout
        with added_cost("runtime snapshot"):
            life.runtime["profiled"] = play.runtime_snapshot(host)
        # a network created while the profile is on: a bridge no record saw
        with added_cost("network created under the profile"):
            # named by the network itself, as com.docker.network.bridge.name lets any network do:
            # rollback must find it by what it is (a bridge), not by dockerd's br-<id> names
            life.bridge_new = "labnew0"
            host.sudo(f"docker network create -o com.docker.network.bridge.name={life.bridge_new} labnew "
                      ">/dev/null", check=True, timeout=60)
            life.facts["new_bridge_profiled"] = bridge_state(host, life.bridge_new)
        # egress isolation off (the firewall role alone, re-run): only the 127/8 drop stands
        # between a loopback SYN and a port the input chain accepts for everyone
        with added_cost("egress isolation off"):
            life.plays["no_isolation"] = play.run_playbook(
                host.inventory_path, play.write_playbook(tmp, "firewall.yml", ["firewall"]),
                extra_vars={**profile_vars(host), "firewall_container_egress_isolation": False})
            assert life.plays["no_isolation"].rc == 0, life.plays["no_isolation"].describe()
            life.facts["nft_no_isolation"] = host.sudo("nft -j list ruleset", check=True).stdout
            life.facts["no_isolation"] = {"loopback_syn": raw_syn(host, "127.0.0.1", HOST_PORT),
                                          "gateway_syn": raw_syn(host, "172.17.0.1", HOST_PORT),
                                          **bridge_state(host, "docker0")}

        # ---- rollback ------------------------------------------------------------------
        host.sudo("docker rm -f web", check=True, timeout=60)
        life.plays["rollback"] = play.run_playbook(host.inventory_path, "rollback.yml")
        assert life.plays["rollback"].rc == 0, life.plays["rollback"].describe()
        life.snaps["rolled_back"] = play.snapshot(host)
        with added_cost("network created under the profile"):
            life.facts["new_bridge_rolled_back"] = bridge_state(host, life.bridge_new)
            life.facts["new_network_syn"] = {
                "loopback_syn": raw_syn(host, "127.0.0.1", LOOPBACK_PORT, "labnew"),
                "gateway_syn": raw_syn(host, gateway_of(host, "labnew"), HOST_PORT, "labnew")}
            # the owner's network, not the profile's: removed here only so that the runtime
            # snapshot can be compared with the one taken before it existed
            host.sudo("docker network rm labnew >/dev/null", check=True, timeout=60)
        with added_cost("runtime snapshot"):
            settle_bridges(host)
            life.runtime["rolled_back"] = play.runtime_snapshot(host)
        life.facts["tables_after_rollback"] = host.sudo("nft list tables").stdout
        start_web(host)
        life.probes["rolled_back"] = probe(host)
        life.audits["rolled_back"] = audit(host)

        # ---- stand-ins for risky workloads: what the audit reads from Docker's API --------
        sleep = "-c 'import time; time.sleep(600)'"
        # (--privileged cannot start in an nspawn host: runc must apply every capability and
        # the host's bounding set lacks some; the stand-in shares the host's namespaces and
        # engine socket instead, and the privileged flag is read the same way, from the inspect)
        with added_cost("stand-in containers and their audit"):
            host.sudo(f"docker run -d --name hostnet --network host labpy {sleep} >/dev/null && "
                      f"docker run -d --name hostns --pid host --ipc host -v /var/run/docker.sock:/var/run/docker.sock "
                      f"labpy {sleep} >/dev/null && "
                      f"docker run -d --name joined --network container:hostnet labpy {sleep} >/dev/null && "
                      f"docker run -d --name runbind -v /run:/host-run:ro labpy {sleep} >/dev/null",
                      check=True, timeout=120)
            life.audits["stand_ins"] = audit(host)
            life.facts["privileged_start"] = host.sudo(f"docker run -d --name priv --privileged labpy {sleep}",
                                                       timeout=120)
            host.sudo("docker rm -f joined runbind hostns hostnet priv >/dev/null", timeout=60)
        yield life
    finally:
        if server is not None:
            server.kill()
            server.wait(timeout=10)
        for addr, dev in hub_addrs:
            lab.hub_exec(["ip", "addr", "del", addr, "dev", dev])
        for argv in reversed(hub_v6):
            lab.hub_exec([*argv[:3], "del", *(a for a in argv[4:] if a != "nodad")])
        lab.stop_hosts([host])


OPEN = {"lan_tcp": "open", "lan_udp": "reply", "nas_tcp": "open", "nas_udp": "reply", "lan_dns": ANSWER,
        "metadata_tcp": "open", "host_tcp": "open", "host_gateway_tcp": "open", "internet_tcp": "open",
        "internet_udp": "reply", "internet_dns": ANSWER, "resolve": ANSWER, "published_from_lan": "200",
        "host_from_lan": "open",
        "v6_lan_ula_tcp": "open", "v6_host_ula_tcp": "open", "v6_host_gateway_tcp": "open",
        "v6_host_link_local_tcp": "open", "v6_multicast_udp": "reply", "v6_internet_tcp": "open",
        # the host's loopback from a bridge without route_localnet: a martian, dropped
        "loopback_syn": "timeout", "gateway_syn": "syn-ack", "host_to_published_source": "10.77.{index}.2"}
PRIVATE_V6 = ("v6_lan_ula_tcp", "v6_host_ula_tcp", "v6_host_gateway_tcp", "v6_host_link_local_tcp")
# Which probe of ISO-1040's walk stands for which packet probe (the walk's destinations are
# representatives of the same rule: a ULA, the host itself on the input hook, multicast).
WALK_FOR_PACKET = {"v6_lan_ula_tcp": "IPv6 unique local address", "v6_host_ula_tcp": "this host's own services (IPv6)",
                   "v6_host_gateway_tcp": "this host's own services (IPv6)",
                   "v6_host_link_local_tcp": "this host's own services (IPv6)",
                   "v6_multicast_udp": "this host's own services (IPv6)"}
# The gateway SYN is the raw-SYN probe's own control: the same frame, to an address the host
# answers on, gets its SYN-ACK before the profile and the bridge's reject under it.
REJECTED = "icmp type 3 code 13"  # destination unreachable, administratively prohibited
PRIVATE = ("lan_tcp", "lan_udp", "lan_dns", "metadata_tcp", "host_tcp", "host_gateway_tcp")
PUBLIC = ("internet_tcp", "internet_udp", "internet_dns", "resolve", "published_from_lan", "host_from_lan")


def walk_verdicts(audit_result: dict[str, Any], bridge: str) -> dict[str, str]:
    """ISO-1040's walk over the facts this audit recorded: probe name -> verdict, for ``bridge``."""
    facts = audit_result["facts"]["network"]
    walked = egress_walk(facts["firewall"], facts["container_egress"])
    assert isinstance(walked, dict), walked
    return {p["name"]: p["verdict"] for p in walked["probes"] if p["interface"] == bridge}


def expected_open(host: LabHost) -> dict[str, str]:
    return {name: value.format(index=host.index) for name, value in OPEN.items()}


def test_before_the_profile_every_probe_gets_through(egress: Egress) -> None:
    """The lab's wiring works: without the profile a container reaches the LAN, the host and
    the metadata address (what the issue measured on a default Docker host)."""
    assert egress.probes["before"] == expected_open(egress.host), egress.probes


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
    assert egress.probes["rolled_back"] == expected_open(egress.host), egress.probes
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


def test_ipv6_reaches_the_internet_and_nothing_private_under_the_profile(egress: Egress) -> None:
    """Neighbour discovery on the bridge is accepted before its reject: the IPv6 internet is
    reachable, the LAN's ULA, the host's own ULA, gateway and link-local addresses are rejected."""
    got = egress.probes["profiled"]
    assert got["v6_internet_tcp"] == "open", got
    blocked = {name: got[name] for name in PRIVATE_V6}
    assert all(v.startswith("error") for v in blocked.values()), blocked
    # rejected too, but no ICMP error answers a packet sent to a multicast group
    assert got["v6_multicast_udp"] == "timeout", got


def link_local(egress: Egress, phase: str) -> str:
    """The IPv6 bridge's link-local address, as that phase's runtime snapshot listed it."""
    for line in egress.runtime[phase]["addresses"]:
        parts = line.split()
        if parts[1:3] == [egress.bridge_v6, "inet6"] and parts[3].startswith("fe80:"):
            return parts[3].split("/")[0]
    raise AssertionError(f"no link-local address on {egress.bridge_v6} in the {phase} snapshot")


def lab_probes6(egress: Egress, phase: str) -> dict[str, Probe]:
    """The lab's own IPv6 destinations as walk probes: what the packets were sent to, on the
    hook they take (the host's own addresses and the all-nodes group are delivered to it)."""
    host = egress.host
    gateway = containers6(host).replace("::/64", "::1")
    return {"v6_lan_ula_tcp": Probe("LAN ULA", "forward", lan6(host, 1), "tcp", TCP_PORT),
            "v6_host_ula_tcp": Probe("host ULA", "input", lan6(host, 2), "tcp", HOST_PORT),
            "v6_host_gateway_tcp": Probe("gateway", "input", gateway, "tcp", HOST_PORT),
            "v6_host_link_local_tcp": Probe("link-local", "input", link_local(egress, phase), "tcp", HOST_PORT),
            "v6_multicast_udp": Probe("all-nodes", "input", ALL_NODES, "udp", UDP_PORT),
            "v6_internet_tcp": Probe("internet", "forward", internet6(host), "tcp", TCP_PORT)}


def test_the_walk_gives_the_packets_answer_for_ipv6(egress: Egress) -> None:
    """For the IPv6 bridge, the walk of the ruleset each audit recorded matches the packets:
    ISO-1040's own representative probes, and the lab's actual destinations (the LAN's ULA,
    the host's ULA, gateway and link-local addresses, the all-nodes multicast group, the
    internet), reachable before and after rollback, blocked under the profile but the internet."""
    for phase in ("before", "profiled", "rolled_back"):
        verdicts = walk_verdicts(egress.audits[phase], egress.bridge_v6)
        ruleset = Ruleset(egress.audits[phase]["facts"]["network"]["firewall"]["nftables"])
        for packet, probe_ in lab_probes6(egress, phase).items():
            got = egress.probes[phase][packet]
            assert got in ("open", "reply", "timeout") or got.startswith("error"), (phase, packet, got)
            expected = "reachable" if got in ("open", "reply") else "blocked"
            walked = walk_probe(ruleset, probe_, egress.bridge_v6)
            assert walked["verdict"] == expected, (phase, packet, got, walked)
            if packet in WALK_FOR_PACKET:
                assert verdicts[WALK_FOR_PACKET[packet]] == expected, (phase, packet, got, verdicts)


def test_loopback_syn_from_a_container_is_dropped_before_under_and_after(egress: Egress) -> None:
    """route_localnet=1 under the profile (userland-proxy off), yet the input chain drops the
    container's SYN to 127.0.0.1; before the profile and after rollback the kernel drops it as
    a martian, exactly as before. The gateway SYN shows the raw probe works."""
    before, profiled, after = (egress.probes[k] for k in ("before", "profiled", "rolled_back"))
    assert (before["loopback_syn"], before["gateway_syn"]) == ("timeout", "syn-ack"), before
    assert (profiled["loopback_syn"], profiled["gateway_syn"]) == ("timeout", REJECTED), profiled
    assert (after["loopback_syn"], after["gateway_syn"]) == (before["loopback_syn"], before["gateway_syn"]), after
    sysctls = {phase: egress.runtime[phase]["sysctls"] for phase in egress.runtime}
    for bridge in ("docker0", egress.bridge_v6):
        key = f"net.ipv4.conf.{bridge}.route_localnet"
        assert (sysctls["before"][key], sysctls["profiled"][key], sysctls["rolled_back"][key]) == ("0", "1", "0"), key


def test_route_localnet_alone_lets_the_loopback_syn_through(egress: Egress) -> None:
    """Positive control: before the profile, with route_localnet=1 set by hand on docker0 and
    no firewall, the same raw SYN to 127.0.0.1 gets its SYN-ACK. A timeout elsewhere is the
    kernel's martian check or a rule, not a probe that cannot work."""
    assert egress.facts["control_loopback_syn"] == "syn-ack"


def test_without_egress_isolation_the_loopback_drop_alone_protects(egress: Egress) -> None:
    """firewall_container_egress_isolation false: no reject for the bridges, so the input
    chain accepts HOST_PORT from a container (the gateway SYN gets its SYN-ACK); the same SYN
    to 127.0.0.1:HOST_PORT, with route_localnet=1 on docker0, is dropped by the 127/8 rule.
    The walk of that ruleset agrees, and without the rule it no longer says blocked."""
    state = egress.facts["no_isolation"]
    assert (state["route_localnet"], state["gateway_syn"], state["loopback_syn"]) == ("1", "syn-ack", "timeout"), state
    items = parse_nft_ruleset(egress.facts["nft_no_isolation"])
    assert isinstance(items, list), items
    walked = loopback_walk(items, ["docker0"])
    assert isinstance(walked, list), walked
    assert [(p["verdict"], p["evidence"]) for p in walked] == [("blocked", "dropped in inet hostcheck input")], walked
    without = [item for item in items if not is_loopback_drop(item)]
    assert len(without) == len(items) - 1
    walked = loopback_walk(without, ["docker0"])
    assert isinstance(walked, list) and walked[0]["verdict"] != "blocked", walked


def is_loopback_drop(item: dict[str, Any]) -> bool:
    rule = item.get("rule")
    return (isinstance(rule, dict) and rule.get("table") == "hostcheck" and rule.get("chain") == "input"
            and "127.0.0.0" in json.dumps(rule["expr"]) and {"drop": None} in rule["expr"])


def test_a_network_created_under_the_profile_is_put_back_by_rollback(egress: Egress) -> None:
    """A bridge dockerd created while the profile was on (route_localnet=1 and the
    `--src-type LOCAL` masquerade rule, which no record saw) has route_localnet 0 and no such
    rule after rollback, as the owner's configuration (userland-proxy on) would have made it;
    a container on it gets no SYN-ACK from the host's 127.0.0.1, while the same probe to its
    gateway does."""
    assert egress.facts["new_bridge_profiled"] == {"route_localnet": "1", "masquerade_local": True}
    assert egress.facts["new_bridge_rolled_back"] == {"route_localnet": "0", "masquerade_local": False}
    assert egress.facts["new_network_syn"] == {"loopback_syn": "timeout", "gateway_syn": "syn-ack"}


def test_stored_rulesets_are_what_the_template_renders(egress: Egress) -> None:
    """tests/snapshots/nft/ holds this lab's rulesets; the template must still render their
    table inet hostcheck (addresses aside). HOSTCHECK_RECORD_NFT=DIR writes them anew."""
    live = {name: nft_document(egress.facts[f"nft_{name}"]) for name in NFT_SNAPSHOTS}
    target = os.environ.get("HOSTCHECK_RECORD_NFT")
    if target:
        for name, file in NFT_SNAPSHOTS.items():
            lines = ",\n".join(json.dumps(item, sort_keys=True) for item in live[name]["nftables"])
            with open(os.path.join(target, file), "w", encoding="utf-8") as handle:
                handle.write('{"nftables": [\n' + lines + "\n]}\n")
    for name, file in NFT_SNAPSHOTS.items():
        with open(os.path.join(NFT_DIR, file), encoding="utf-8") as handle:
            stored = json.load(handle)
        assert template_shape(stored) == template_shape(live[name]), (
            f"{file} is not what the template renders now: rerun this module with HOSTCHECK_RECORD_NFT="
            "tests/snapshots/nft")
        # Docker's own chains are in it too: the walk meets them on the same hooks
        assert any(item.get("chain", {}).get("name") == "DOCKER-USER" for item in stored["nftables"]), file


def test_iso_1060_follows_route_localnet_and_the_firewall(egress: Egress) -> None:
    rows = {phase: egress.audits[phase]["rows"]["ISO-1060"] for phase in ("before", "profiled", "rolled_back")}
    assert all(row["status"] == "pass" for row in rows.values()), rows
    assert "route_localnet=1 on" in rows["profiled"]["detail"] and "dropped in inet hostcheck input" in rows["profiled"]["detail"]
    assert "route_localnet=0" in rows["before"]["detail"] and "route_localnet=0" in rows["rolled_back"]["detail"]


def test_rollback_restores_the_runtime_state(egress: Egress) -> None:
    """Sysctls of every interface, nft and iptables rules of both backends, bridges, links,
    addresses and routes equal the snapshot taken before the profile. Loaded modules are
    recorded but not compared: an nspawn host sees the machine's kernel, whose modules other
    tests load too (and a container cannot unload them)."""
    diff = play.runtime_diff(egress.runtime["before"], egress.runtime["rolled_back"], skip=("modules",))
    assert diff == {}, json.dumps(diff, indent=1)[:6000]
    # the profile did change runtime state, so the comparison can fail
    assert play.runtime_diff(egress.runtime["before"], egress.runtime["profiled"], skip=("modules",))


def test_audit_names_host_network_and_host_namespace_containers(egress: Egress) -> None:
    """ISO-1050, read from Docker's API: an owner risk (high) naming each stand-in and what it
    shares with the host: the host network (its own, and through another container's with
    --network container:), the host's PID and IPC namespaces and docker.sock, /run (which
    holds docker.sock); the web container alone passed before. A --privileged container
    cannot start on an nspawn host (recorded here); the flag is read from the same inspect
    (tests/unit/checks/test_checks.py, tests/unit/collectors/test_collectors_isolation.py)."""
    row = egress.audits["stand_ins"]["rows"]["ISO-1050"]
    assert (row["status"], row["level"], row["measured"]) == ("warn", "high", 4), row
    assert "hostnet: host network" in row["detail"], row
    assert re.search(r"hostns: host PID namespace, host IPC namespace, (/var)?/run/docker\.sock mounted",
                     row["detail"]), row
    assert "joined: host network (through container:" in row["detail"], row
    assert "runbind: /run mounted" in row["detail"], row
    assert "unable to apply caps" in egress.facts["privileged_start"].stderr
    assert egress.audits["before"]["rows"]["ISO-1050"]["status"] == "pass"


def test_docker_masquerades_the_hosts_own_traffic_only_under_the_profile(egress: Egress) -> None:
    """userland-proxy off adds `-m addrtype --src-type LOCAL -j MASQUERADE` for docker0: the
    web container sees the host's fetch of its published port come from the bridge address.
    Restarting the engine on the restored daemon.json takes the rule away: the source is the
    host's own address again, as before the profile."""
    sources = {phase: egress.probes[phase]["host_to_published_source"] for phase in ("before", "profiled", "rolled_back")}
    assert sources == {"before": egress.host.ip, "profiled": "172.17.0.1", "rolled_back": egress.host.ip}, sources
    def masquerades_local(lines: list[str]) -> bool:
        return any(all(part in line for part in ("-A POSTROUTING", "-o docker0", "--src-type LOCAL", "MASQUERADE"))
                   for line in lines)
    present = {phase: masquerades_local(egress.runtime[phase]["firewall"]["iptables-nft-save"]) for phase in egress.runtime}
    assert present == {"before": False, "profiled": True, "rolled_back": False}, present
