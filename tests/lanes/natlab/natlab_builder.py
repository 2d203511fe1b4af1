"""A real NAT lab in network namespaces: host -> homerouter -> isp -> internet.

Used by the NAT lab tests (``tests/lanes/natlab``) and by ``bench/network.py``. Everything it
creates lives in namespaces whose names carry this process id and a random part; it never
changes the machine's own routes, sysctls or firewall (sysctls and nftables only inside the
two router namespaces). :meth:`NatLab.close` kills the daemons it started and deletes the
namespaces; :func:`remove_stale_labs` removes labs left behind by a killed test process.

Addresses (IPv4; IPv6 in ``2001:db8::/32`` alongside, routed without NAT)::

    host 192.168.1.10 --lan0-- homerouter 192.168.1.1
    homerouter WAN 100.64.0.2/10 (cgnat) | 198.51.100.2/24 (plain) | 10.0.0.2/24 (double)
      --- isp 100.64.0.1 | 198.51.100.1 | 10.0.0.1
    isp 203.0.113.2 --- internet 203.0.113.1 (+ .10, .11 for the STUN server)

"double" makes the "isp" namespace a second private-range NAT router in front of the home
router (double NAT). Variants of one lab, switched in place and switched back by the tests:
the carrier answering TTL-exceeded from its public address (:meth:`NatLab.carrier_icmp_from_public`),
and the host's own IPv4 addressing (:meth:`NatLab.set_host_ipv4`: behind the home router, on
a 100.64.0.0/10 address, or none at all — IPv6-only).

The documentation ranges play "the public internet", so the code under test must be told
(``public_ranges``) to count them as global.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PYTHON = (
    str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
)
NSRUN = str(Path(__file__).resolve().parent / "nsrun.py")
RESPONDER = str(Path(__file__).resolve().parent / "udp_responder.py")

PREFIX = "hcnl"
ROLES = ("host", "home", "isp", "inet")

HOST_IP = "192.168.1.10"
HOME_LAN_IP = "192.168.1.1"
ISP_OUT_IP = "203.0.113.2"
INET_IP = "203.0.113.1"
STUN_IP1 = "203.0.113.10"
STUN_IP2 = "203.0.113.11"
STUN_PORT = 3478
STUN_ALT_PORT = 3479
STUN_IP6 = "2001:db8:3::10"
HOST_IP6 = "2001:db8:1::10"
# Extra servers started by tests (silent, error-answering) listen here.
AUX_IP = "203.0.113.20"
AUX_IP2 = "203.0.113.21"
PROBE_SERVER_PORT = 8470
PROBE_TOKEN = "natlab-probe-token-" + secrets.token_hex(6)
FORWARDED_PORT = 40000
PUBLIC_RANGES = ["198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"]

WAN = {
    "plain": {"home_wan": "198.51.100.2", "isp_in": "198.51.100.1", "prefix": 24},
    "cgnat": {"home_wan": "100.64.0.2", "isp_in": "100.64.0.1", "prefix": 10},
    "double": {"home_wan": "10.0.0.2", "isp_in": "10.0.0.1", "prefix": 24},
}
# The ISP kinds whose router translates addresses (CGNAT, or a second private-range router).
NATTING_ISP = {"cgnat": "100.64.0.0/10", "double": "10.0.0.0/24"}
HOST_SHARED_IP = "100.100.0.10"
HOME_SHARED_IP = "100.100.0.1"
PROBE_SERVER_PORT6 = 8471

LAB_STUN_SERVERS = [f"{STUN_IP1}:{STUN_PORT}", f"{STUN_IP2}:{STUN_PORT}", f"[{STUN_IP6}]:{STUN_PORT}"]


def collect_args(**extra: object) -> dict[str, object]:
    """Arguments for ``nsrun.py collect``: the lab's servers and "public" ranges, never defaults."""
    args: dict[str, object] = {"stun_servers": LAB_STUN_SERVERS, "public_ranges": PUBLIC_RANGES}
    args.update(extra)
    return args


HOME_VARIANTS = ("masquerade", "fully-random", "port-forward", "restricted-cone")


def sh(
    argv: list[str], *, check: bool = True, timeout: float = 20, input: str | None = None
) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _netns_list() -> list[str]:
    out = sh(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_netns_pids(ns: str) -> None:
    # Anything running inside one of our namespaces was started by a lab: it goes with it.
    pids = sh(["ip", "netns", "pids", ns], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def remove_stale_labs() -> list[str]:
    """Delete lab namespaces whose creating process is gone (a killed earlier run)."""
    removed = []
    pattern = re.compile(rf"^{PREFIX}(\d+)x[0-9a-f]+-({'|'.join(ROLES)})$")
    for ns in _netns_list():
        m = pattern.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _kill_netns_pids(ns)
            sh(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    return removed


def home_ruleset(
    variant: str, firewall: bool, block_udp: bool = False, hairpin_wan: str | None = None,
    forwards: tuple[tuple[str, int, int], ...] = (),
) -> str:
    """The home router's nftables tables for a NAT variant (replaced atomically).

    Only our own tables are replaced, so miniupnpd's tables stay as they are. With
    ``hairpin_wan`` (the router's WAN address) the router also loops LAN traffic sent to its
    WAN address back to the host ("NAT loopback"), the way some routers do. ``forwards`` are
    port ranges ``(proto, first, last)`` forwarded from the WAN to the host, whatever the variant.
    """
    if variant not in HOME_VARIANTS:
        raise ValueError(variant)
    masq = "masquerade fully-random" if variant == "fully-random" else "masquerade"
    pre = ""
    fwd = ""
    decl = ""
    if variant == "port-forward":
        pre = (
            f'iifname "wan0" tcp dport {FORWARDED_PORT} dnat to {HOST_IP}\n'
            f'iifname "wan0" udp dport {FORWARDED_PORT} dnat to {HOST_IP}\n'
        )
    elif variant == "restricted-cone":
        # Address-restricted cone: a remote address the host has sent to may reach the
        # mapped port from any of its ports. Linux masquerade keeps the source port when it
        # is free, so the mapped port is the host's port and the DNAT keeps it.
        decl = "set contacted { type ipv4_addr . inet_service; flags dynamic, timeout; timeout 2m; }\n"
        pre = f'iifname "wan0" ip saddr . udp dport @contacted dnat to {HOST_IP}\n'
        fwd = 'iifname "lan0" oifname "wan0" meta l4proto udp update @contacted { ip daddr . udp sport }\n'
    rules = [
        "table ip hcnat {}",
        "delete table ip hcnat",
        "table ip hcnat {",
        decl,
        "chain prerouting { type nat hook prerouting priority dstnat; policy accept;",
        pre,
        "".join(f'iifname "wan0" {proto} dport {first}-{last} dnat to {HOST_IP}\n' for proto, first, last in forwards),
        (f'iifname "lan0" ip daddr {hairpin_wan} dnat to {HOST_IP}\n' if hairpin_wan else ""),
        "}",
        "chain postrouting { type nat hook postrouting priority srcnat; policy accept;",
        f'oifname "wan0" {masq}',
        ('iifname "lan0" oifname "lan0" masquerade\n' if hairpin_wan else ""),
        "}",
        "chain forward { type filter hook forward priority -10; policy accept;",
        fwd,
        ("meta l4proto udp drop\n" if block_udp else ""),
        "}",
        "}",
        "table inet hcfw {}",
        "delete table inet hcfw",
    ]
    if firewall:
        rules += [
            "table inet hcfw {",
            "chain input { type filter hook input priority 0; policy accept;",
            'iifname "wan0" ct state established,related accept',
            'iifname "wan0" meta l4proto ipv6-icmp accept',
            'iifname "wan0" ct state new drop',
            "}",
            "chain forward { type filter hook forward priority 0; policy accept;",
            'iifname "wan0" ct state established,related accept',
            'iifname "wan0" ct status dnat accept',
            'iifname "wan0" meta l4proto ipv6-icmp accept',
            'iifname "wan0" ct state new drop',
            "}",
            "}",
        ]
    return "\n".join(r for r in rules if r) + "\n"


def isp_ruleset(mode: str, firewall: bool) -> str:
    rules = ["table ip hcnat {}", "delete table ip hcnat", "table inet hcfw {}", "delete table inet hcfw"]
    inside = NATTING_ISP.get(mode)
    if inside:
        rules += [
            "table ip hcnat {",
            "chain postrouting { type nat hook postrouting priority srcnat; policy accept;",
            f'oifname "out0" ip saddr {inside} masquerade',
            "}",
            "}",
        ]
    if firewall:
        # An ISP does not filter what its customers receive, except where its NAT has no
        # mapping (CGNAT) — and the router itself accepts nothing new from outside.
        rules += [
            "table inet hcfw {",
            "chain input { type filter hook input priority 0; policy accept;",
            'iifname "out0" ct state established,related accept',
            'iifname "out0" meta l4proto ipv6-icmp accept',
            'iifname "out0" ct state new drop',
            "}",
        ]
        if inside:
            rules += [
                "chain forward { type filter hook forward priority 0; policy accept;",
                f'iifname "out0" ip daddr {inside} ct state new drop',
                "}",
            ]
        rules.append("}")
    return "\n".join(rules) + "\n"


@dataclass
class NatLab:
    """One lab topology (``isp`` is "plain" or "cgnat"); build with :meth:`build`."""

    isp: str = "plain"
    with_upnp: bool = True
    upnp_stun: bool = False
    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}x{secrets.token_hex(3)}")
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    tmp: Path | None = None
    home_variant: str | None = None
    home_firewall: bool | None = None
    isp_firewall: bool | None = None
    built: list[str] = field(default_factory=list)

    def ns(self, role: str) -> str:
        return f"{self.tag}-{role}"

    @property
    def home_wan_ip(self) -> str:
        return WAN[self.isp]["home_wan"]

    @property
    def expected_mapped_ip(self) -> str:
        """The address the internet sees for the host's traffic."""
        return ISP_OUT_IP if self.isp in NATTING_ISP else self.home_wan_ip

    # -- plumbing -----------------------------------------------------------------
    def ipn(self, role: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh(["ip", "-n", self.ns(role), *args], check=check)

    def exec(
        self, role: str, argv: list[str], *, check: bool = True, timeout: float = 30, input: str | None = None
    ) -> subprocess.CompletedProcess:
        return sh(["ip", "netns", "exec", self.ns(role), *argv], check=check, timeout=timeout, input=input)

    def popen(self, name: str, role: str, argv: list[str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(role), *argv],
            stdin=subprocess.DEVNULL,
            stdout=kw.pop("stdout", subprocess.PIPE),
            stderr=kw.pop("stderr", subprocess.PIPE),
            text=True,
            **kw,
        )
        self.procs[name] = proc
        return proc

    def stop(self, name: str, sig: int = signal.SIGKILL, timeout: float = 5) -> tuple[str, str]:
        proc = self.procs.pop(name, None)
        if proc is None:
            return "", ""
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=5)
        return out or "", err or ""

    def nft(self, role: str, ruleset: str) -> None:
        self.exec(role, ["nft", "-f", "-"], input=ruleset)

    # -- build / teardown -----------------------------------------------------------
    def build(self) -> NatLab:
        if self.isp not in WAN:
            raise ValueError(self.isp)
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{self.tag}-"))
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        w = WAN[self.isp]
        for role in ROLES:
            sh(["ip", "netns", "add", self.ns(role)])
            self.built.append(role)
            self.ipn(role, "link", "set", "lo", "up")
        # veth pairs are created directly inside the namespaces: nothing appears on the host.
        self.ipn(
            "home", "link", "add", "lan0", "type", "veth", "peer", "name", "h0", "netns", self.ns("host")
        )
        self.ipn(
            "isp", "link", "add", "in0", "type", "veth", "peer", "name", "wan0", "netns", self.ns("home")
        )
        self.ipn("isp", "link", "add", "out0", "type", "veth", "peer", "name", "e0", "netns", self.ns("inet"))
        addrs = [
            ("host", "h0", f"{HOST_IP}/24"),
            ("host", "h0", f"{HOST_IP6}/64"),
            ("home", "lan0", f"{HOME_LAN_IP}/24"),
            ("home", "lan0", "2001:db8:1::1/64"),
            ("home", "wan0", f"{w['home_wan']}/{w['prefix']}"),
            ("home", "wan0", "2001:db8:2::2/64"),
            ("isp", "in0", f"{w['isp_in']}/{w['prefix']}"),
            ("isp", "in0", "2001:db8:2::1/64"),
            ("isp", "out0", f"{ISP_OUT_IP}/24"),
            ("isp", "out0", "2001:db8:3::2/64"),
            ("inet", "e0", f"{INET_IP}/24"),
            ("inet", "e0", f"{STUN_IP1}/24"),
            ("inet", "e0", f"{STUN_IP2}/24"),
            ("inet", "e0", f"{AUX_IP}/24"),
            ("inet", "e0", f"{AUX_IP2}/24"),
            ("inet", "e0", "2001:db8:3::1/64"),
            ("inet", "e0", f"{STUN_IP6}/64"),
        ]
        for role, dev, cidr in addrs:
            extra = ["nodad"] if ":" in cidr else []
            self.ipn(role, "addr", "add", cidr, "dev", dev, *extra)
        for role, dev in (
            ("host", "h0"),
            ("home", "lan0"),
            ("home", "wan0"),
            ("isp", "in0"),
            ("isp", "out0"),
            ("inet", "e0"),
        ):
            self.ipn(role, "link", "set", dev, "up")
        self.ipn("host", "route", "add", "default", "via", HOME_LAN_IP)
        self.ipn("host", "-6", "route", "add", "default", "via", "2001:db8:1::1")
        self.ipn("home", "route", "add", "default", "via", w["isp_in"])
        self.ipn("home", "-6", "route", "add", "default", "via", "2001:db8:2::1")
        self.ipn("isp", "route", "add", "default", "via", INET_IP)
        self.ipn("isp", "-6", "route", "add", "default", "via", "2001:db8:3::1")
        self.ipn("isp", "-6", "route", "add", "2001:db8:1::/64", "via", "2001:db8:2::2")
        self.ipn("inet", "-6", "route", "add", "2001:db8::/32", "via", "2001:db8:3::2")
        if self.isp == "plain":
            self.ipn("inet", "route", "add", "198.51.100.0/24", "via", ISP_OUT_IP)
        for role in ("home", "isp"):
            # Router namespaces only: the machine's own sysctls are never touched.
            self.exec(role, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
            self.exec(role, ["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"])
        # The ports the probe server connects back to lie in Linux's default ephemeral range:
        # an outgoing connection of an earlier test still holding one would make the audit's
        # listener find it in use ("unverified"). Only this namespace's range moves.
        self.exec("host", ["sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={FORWARDED_PORT + 100} 60999"])
        for role in ("home", "isp", "inet"):
            # Back-to-back hop probes must not meet ICMP rate limiting (a flaky hop list), nor
            # use up what a refusing STUN server's port-unreachable needs.
            self.exec(role, ["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"])
        self.set_isp(firewall=False)
        self.set_home("masquerade", firewall=False)
        self.start_coturn()
        if self.with_upnp:
            self.start_miniupnpd()

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        for role in reversed(self.built):
            _kill_netns_pids(self.ns(role))
            sh(["ip", "netns", "del", self.ns(role)], check=False)
        self.built.clear()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self) -> NatLab:
        return self.build()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- router configuration ----------------------------------------------------
    def set_home(self, variant: str, firewall: bool, block_udp: bool = False, hairpin: bool = False,
                 forwards: tuple[tuple[str, int, int], ...] = ()) -> None:
        self.nft("home", home_ruleset(variant, firewall, block_udp, self.home_wan_ip if hairpin else None, forwards))
        self.home_variant, self.home_firewall = variant, firewall

    def set_isp(self, firewall: bool) -> None:
        self.nft("isp", isp_ruleset(self.isp, firewall))
        self.isp_firewall = firewall

    def carrier_icmp_from_public(self, on: bool) -> None:
        """The ISP router answers its customers' expired packets from its public address.

        Carrier routers often do (their errors leave from the address of a routed
        interface), so the hop after the home router looks public even behind CGNAT.
        """
        w = WAN[self.isp]
        net = {"cgnat": "100.64.0.0/10", "double": "10.0.0.0/24", "plain": "198.51.100.0/24"}[self.isp]
        src = ISP_OUT_IP if on else w["isp_in"]
        self.ipn("isp", "route", "replace", net, "dev", "in0", "proto", "kernel", "scope", "link", "src", src)

    def set_host_ipv4(self, mode: str) -> None:
        """The host's IPv4: "lan" (192.168.1.10 behind the home router), "shared" (a
        100.64.0.0/10 address of its own, still behind the home router's NAT), or "none"
        (IPv6-only: no IPv4 address or route; IPv6 stays)."""
        if mode not in ("lan", "shared", "none"):
            raise ValueError(mode)
        self.ipn("host", "-4", "route", "flush", "dev", "h0")
        self.ipn("host", "-4", "addr", "flush", "dev", "h0")
        self.ipn("home", "addr", "del", f"{HOME_SHARED_IP}/24", "dev", "lan0", check=False)
        if mode == "lan":
            self.ipn("host", "addr", "add", f"{HOST_IP}/24", "dev", "h0")
            self.ipn("host", "route", "add", "default", "via", HOME_LAN_IP)
        elif mode == "shared":
            self.ipn("home", "addr", "add", f"{HOME_SHARED_IP}/24", "dev", "lan0")
            self.ipn("host", "addr", "add", f"{HOST_SHARED_IP}/24", "dev", "h0")
            self.ipn("host", "route", "add", "default", "via", HOME_SHARED_IP)

    # -- daemons -------------------------------------------------------------------
    def start_coturn(
        self,
        name: str = "coturn",
        ips: tuple[str, ...] = (STUN_IP1, STUN_IP2, STUN_IP6),
        extra: tuple[str, ...] = (),
    ) -> None:
        """coturn as the lab's STUN server; with two IPv4 addresses it speaks RFC 5780."""
        assert self.tmp is not None
        conf = self.tmp / f"{name}.conf"
        conf.write_text(
            "\n".join(
                [
                    *(f"listening-ip={ip}" for ip in ips),
                    f"listening-port={STUN_PORT}",
                    f"alt-listening-port={STUN_ALT_PORT}",
                    "stun-only",
                    "no-tls",
                    "no-dtls",
                    "no-tcp",
                    "no-cli",
                    "simple-log",
                    f"log-file={self.tmp / (name + '.log')}",
                    f"pidfile={self.tmp / (name + '.pid')}",
                    f"userdb={self.tmp / (name + '.db')}",
                    *extra,
                    "",
                ]
            )
        )
        self.popen(
            name,
            "inet",
            ["turnserver", "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.wait_udp_listen("inet", ips[0], STUN_PORT)

    def start_miniupnpd(self, stun: bool | None = None) -> None:
        """(Re)start miniupnpd; ``stun`` makes it learn its public address by STUN."""
        assert self.tmp is not None
        if stun is not None:
            self.upnp_stun = stun
        conf = self.tmp / "miniupnpd.conf"
        lines = [
            "ext_ifname=wan0",
            "listening_ip=lan0",
            "http_port=0",
            "enable_natpmp=yes",
            "enable_upnp=yes",
            "secure_mode=yes",
            "system_uptime=yes",
            f"uuid=3d3cec3a-8cf0-11e0-98ee-{secrets.token_hex(6)}",
            f"lease_file={self.tmp / 'upnp.leases'}",
            "allow 1024-65535 192.168.1.0/24 1024-65535",
            "deny 0-65535 0.0.0.0/0 0-65535",
            "ipv6_disable=yes",
        ]
        if self.upnp_stun:
            lines += ["ext_perform_stun=yes", f"ext_stun_host={STUN_IP1}", f"ext_stun_port={STUN_PORT}"]
        conf.write_text("\n".join(lines) + "\n")
        self.stop("miniupnpd")
        self.popen(
            "miniupnpd",
            "home",
            ["miniupnpd", "-f", str(conf), "-d", "-P", str(self.tmp / "miniupnpd.pid")],
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / "miniupnpd.log", "w"),
        )
        self.wait_udp_listen("home", "0.0.0.0", 5351, any_addr=True)

    def wait_udp_listen(
        self, role: str, ip: str, port: int, timeout: float = 10, any_addr: bool = False
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.exec(role, ["ss", "-Hlun"], check=False).stdout
            for line in out.splitlines():
                parts = line.split()
                if (
                    len(parts) >= 4
                    and parts[3].endswith(f":{port}")
                    and (any_addr or parts[3].startswith(ip))
                ):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"nothing listens on udp {ip}:{port} in {role} after {timeout}s")

    def wait_tcp_listen(self, role: str, port: int, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.exec(role, ["ss", "-Hltn"], check=False).stdout
            if any(
                line.split()[3].endswith(f":{port}") for line in out.splitlines() if len(line.split()) >= 4
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"nothing listens on tcp port {port} in {role} after {timeout}s")

    def start_probe_server(
        self, token: str, *, bind: str = INET_IP, port: int = PROBE_SERVER_PORT, name: str = "probe-server",
        role: str = "inet", **kw: int,
    ) -> str:
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]);"
            "from hostcheck.probeserver.server import serve;"
            "serve(sys.argv[2], int(sys.argv[3]), sys.argv[4], **__import__('json').loads(sys.argv[5]))"
        )
        self.popen(name, role, [PYTHON, "-c", code, str(REPO), bind, str(port), token, json.dumps(kw)])
        self.wait_tcp_listen(role, port)
        return f"http://[{bind}]:{port}" if ":" in bind else f"http://{bind}:{port}"

    def start_responder(self, name: str, mode: str, port: int, code: int = 420) -> None:
        self.popen(name, "inet", [PYTHON, RESPONDER, mode, AUX_IP, str(port), str(code)])
        self.wait_udp_listen("inet", AUX_IP, port)

    def stop_responder(self, name: str) -> dict:
        out, err = self.stop(name, signal.SIGTERM)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"responder {name} printed no count: {err}")
        return json.loads(lines[-1])

    # -- running the code under test inside the host namespace ------------------------
    def run_host(self, mode: str, args: dict, timeout: float = 30) -> dict:
        """Run ``nsrun.py MODE ARGS`` in the host namespace; returns its JSON output."""
        proc = self.exec("host", [PYTHON, NSRUN, mode, json.dumps(args)], check=False, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"nsrun {mode} failed ({proc.returncode}): {proc.stderr[-3000:]}")
        return json.loads(proc.stdout)
