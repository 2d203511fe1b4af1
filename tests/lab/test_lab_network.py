"""Networking of nspawn lab hosts, and proof that the machine running them is untouched.

Each host: ``host0`` 10.77.i.2/24 (peer in the lab's hub namespace), ``tap0`` via
slirp4netns for the Debian mirror. nftables and ``net.*`` sysctls work inside (they are per
network namespace); ``kernel.*`` sysctls must not (one kernel is shared with this machine,
which lab-hosts.md saw get written from an unsafe chroot).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.nspawn, pytest.mark.root]


def _machine_state() -> dict[str, str]:
    """What a lab must never change on this machine: routes, addresses, firewall, sysctls."""
    def out(argv: list[str]) -> str:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout

    state = {
        "routes4": out(["ip", "-4", "route", "show", "table", "all"]),
        "routes6": out(["ip", "-6", "route", "show", "table", "all"]),
        "addresses": out(["ip", "-br", "addr"]),
        "nft": out(["nft", "list", "ruleset"]),
        "hostname": Path("/proc/sys/kernel/hostname").read_text(),
    }
    for key in ("kernel/kptr_restrict", "kernel/dmesg_restrict", "net/ipv4/ip_forward",
                "net/ipv4/conf/all/forwarding", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/rp_filter"):
        path = Path("/proc/sys", key)
        state[key] = path.read_text() if path.exists() else "absent"
    return state


@pytest.mark.parametrize(("argv", "expected", "why"), [
    ("ip -4 -br addr show host0", "10.77.{i}.2/24", "the address the inventory and the audit use"),
    ("ip -4 -br addr show tap0", "10.0.2.100/24", "slirp4netns: the way to the Debian mirror"),
    ("ip route show default", "default via 10.0.2.2 dev tap0", "package downloads leave through slirp, not the machine"),
    ("ip route show 10.77.0.0/16", "10.77.0.0/16 via 10.77.{i}.1 dev host0", "other lab hosts are reached via the hub"),
    ("cat /etc/resolv.conf", "nameserver 10.0.2.3", "slirp4netns answers DNS there"),
])
def test_host_network(shared_lab_host, argv, expected, why):
    """Each row's reason is in ``why``."""
    out = shared_lab_host.run(argv, check=True).stdout
    assert expected.format(i=shared_lab_host.index) in out, f"{why}: {out}"


def test_nftables_enforced_inside(lab_host):
    """Firewall roles are only testable if a ruleset loaded inside really filters traffic
    arriving from outside the host."""
    lab_host.sudo("systemd-run --unit=lab-http -p Type=exec python3 -m http.server 8080", check=True)
    assert _wait_state(lab_host, 8080, "open")
    lab_host.sudo("nft -f - <<'EOF'\ntable inet labtest {\n chain input {\n"
                  "  type filter hook input priority 0; policy accept;\n  tcp dport 8080 drop\n }\n}\nEOF", check=True)
    assert lab_host.tcp_from_outside(8080, timeout=1.5) == "timeout"
    assert lab_host.tcp_from_outside(22) == "open"
    lab_host.sudo("nft delete table inet labtest", check=True)
    assert lab_host.tcp_from_outside(8080) == "open"


def _wait_state(host, port: int, state: str, tries: int = 50) -> bool:
    import time

    for _ in range(tries):
        if host.tcp_from_outside(port) == state:
            return True
        time.sleep(0.1)
    return False


def test_sysctls_namespaced_and_machine_untouched(lab_host):
    """``net.*`` is per network namespace and writable inside (roles set forwarding,
    rp_filter); ``kernel.*`` belongs to the shared kernel and must be refused. Whatever the
    host does, this machine's sysctls, routes, addresses and ruleset stay as they were."""
    before = _machine_state()
    ok = lab_host.sudo("sysctl -w net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=2")
    assert ok.rc == 0, ok
    value = lab_host.sudo("sysctl -n net.ipv4.ip_forward").stdout.strip()
    assert value == "1"
    current = Path("/proc/sys/kernel/kptr_restrict").read_text().strip()
    other = "2" if current != "2" else "1"
    refused = lab_host.sudo(f"sysctl -w kernel.kptr_restrict={other}")
    assert refused.rc != 0, "kernel.* sysctl was writable inside a container"
    assert "Read-only file system" in refused.stderr or "permission denied" in refused.stderr, refused
    nft = lab_host.sudo("nft add table inet scratch && nft add chain inet scratch input "
                        "'{ type filter hook input priority 0; policy accept; }'")
    assert nft.rc == 0, nft
    assert _machine_state() == before


def test_kernel_modules_not_loadable(shared_lab_host):
    """modprobe needs the VM lane: a container must not load modules into the shared kernel."""
    result = shared_lab_host.sudo("modprobe dccp")
    assert result.rc != 0


def test_hosts_reach_each_other(lab_hosts):
    """Fleet tests need hosts that see each other on the lab network (through the hub)."""
    first, second = lab_hosts(2)
    probe = f"python3 -c \"import socket; socket.create_connection(('{second.ip}', 22), 3); print('ok')\""
    assert first.run(probe, check=True).stdout.strip() == "ok"


def test_no_lab_address_on_machine(shared_lab_host):
    """The veth peers live in the hub namespace: this machine has no lab address or route."""
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True, timeout=10).stdout
    addresses = subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True, timeout=10).stdout
    assert "10.77." not in routes + addresses
