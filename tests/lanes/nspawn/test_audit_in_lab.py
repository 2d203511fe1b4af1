"""The audit inside the lab: ``hostcheck facts`` on a real systemd host agrees with testinfra.

hostcheck is installed from this working tree into a fresh nspawn host (wheels built here,
installed offline in the host), a small nftables ruleset is loaded, and ``hostcheck facts
--offline`` runs as root. Every fact below is then re-derived independently by testinfra on
the same host, the way an auditor would check the auditor: if the collectors misread sshd's
effective settings, the listening sockets, the firewall or the accounts, these tests say so.

Not covered here (no GPU on these machines): the ``gpu`` section. Its collector is tested
against recorded facts snapshots; on a lab host it can only report NVML as unavailable, which
``test_gpu_reported_unavailable`` checks honestly instead of faking a device.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hostcheck.facts import Unknown, from_jsonable, lookup
from hostcheck.firewall.summary import summarise
from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.nspawn import LabHost

pytestmark = [pytest.mark.nspawn, pytest.mark.root]

RULESET = """table inet labaudit {
    chain input {
        type filter hook input priority 0; policy drop;
        iif "lo" accept
        ct state established,related accept
        tcp dport 22 accept
    }
    chain forward {
        type filter hook forward priority 0; policy drop;
    }
}
"""


@dataclass
class Audited:
    host: LabHost
    facts: dict[str, Any]
    raw: str
    seconds: dict[str, float]


@pytest.fixture(scope="module")
def audited(lab, tmp_path_factory) -> Iterator[Audited]:
    host = lab.start_hosts(1)[0]
    try:
        wheelhouse = build_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))
        seconds = install_hostcheck(host, wheelhouse)
        host.sudo(f"nft -f - <<'EOF'\n{RULESET}EOF", check=True)
        result = host.sudo(f"{VENV}/bin/hostcheck facts --offline", check=True, timeout=120)
        seconds["facts"] = result.seconds
        yield Audited(host, from_jsonable(json.loads(result.stdout)), result.stdout, seconds)
    finally:
        lab.stop_hosts([host])


def fact(audited: Audited, path: str) -> Any:
    value = lookup(audited.facts, path)
    assert not isinstance(value, Unknown), f"{path} is unknown: {value.reason}"
    return value


# OpenSSH documents these as synonyms; sshd -T prints the old spelling, the facts the new one
SSHD_SYNONYMS = {("permitrootlogin", "without-password"): "prohibit-password"}


def sshd_effective(host: LabHost) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in host.testinfra("root").check_output("sshd -T").splitlines():
        key, _, value = line.partition(" ")
        key = key.lower()
        settings.setdefault(key, []).append(SSHD_SYNONYMS.get((key, value), value))
    return settings


def test_facts_are_from_this_host(audited):
    """The facts must describe the lab host, not the machine running the tests."""
    assert fact(audited, "meta.hostname") == audited.host.name
    assert fact(audited, "meta.source") == "live"
    assert fact(audited, "meta.offline") is True


def test_virtualization_matches(audited):
    """Container hosts are judged differently (no own kernel); the audit must notice it."""
    expected = audited.host.testinfra().check_output("systemd-detect-virt")
    assert fact(audited, "system.virtualization") == expected.strip() == "systemd-nspawn"


def test_os_release_matches(audited):
    """Platform requirements are per distribution and version."""
    os_release = dict(
        line.split("=", 1) for line in audited.host.testinfra().file("/etc/os-release").content_string.splitlines()
        if "=" in line
    )
    assert fact(audited, "system.os_id") == os_release["ID"].strip('"')
    assert fact(audited, "system.os_version_id") == os_release["VERSION_ID"].strip('"')


SSHD_KEYS = [
    ("permitrootlogin", "root login is the first thing an attacker tries"),
    ("passwordauthentication", "password logins are brute-forceable from the internet"),
    ("kbdinteractiveauthentication", "keyboard-interactive is password login by another name"),
    ("pubkeyauthentication", "keys must keep working or the owner is locked out"),
    ("permitemptypasswords", "an empty password is no password"),
    ("x11forwarding", "X11 forwarding exposes the owner's display"),
    ("maxauthtries", "limits guessing per connection"),
    ("usepam", "PAM enforces account locks"),
]


@pytest.mark.parametrize(("keyword", "why"), SSHD_KEYS, ids=[k for k, _ in SSHD_KEYS])
def test_sshd_setting_matches(audited, keyword, why):
    """Each row's reason is in ``why``; the audit must report what sshd will really do."""
    expected = sshd_effective(audited.host)[keyword]
    reported = fact(audited, f"ssh.settings.{keyword}")
    assert (reported if isinstance(reported, list) else [reported]) == expected


def test_sshd_read_effectively(audited):
    """Only ``sshd -T`` sees drop-ins the way sshd does; config-file parsing is a fallback."""
    assert fact(audited, "ssh.installed") is True
    assert fact(audited, "ssh.running") is True
    assert fact(audited, "ssh.source") == "sshd -T"
    settings = fact(audited, "ssh.settings")
    mismatched = {
        key: (settings.get(key), values) for key, values in sshd_effective(audited.host).items()
        if key in settings and (settings[key] if isinstance(settings[key], list) else [settings[key]]) != values
    }
    assert mismatched == {}


def _tcp_listeners(audited: Audited) -> set[tuple[str, str, int]]:
    found = set()
    for spec in audited.host.testinfra().socket.get_listening_sockets():
        proto, _, rest = spec.partition("://")
        if proto not in ("tcp", "udp"):
            continue
        address, _, port = rest.rpartition(":")
        found.add((proto, address or "::", int(port)))
    return found


def test_listening_sockets_match(audited):
    """Every listening port is attack surface; the audit's list must be complete and exact."""
    reported = {(s["proto"], s["address"], int(s["port"])) for s in fact(audited, "network.listening")}
    assert reported == _tcp_listeners(audited)


def test_sshd_listens_on_all_addresses(audited):
    """The audit must attribute port 22 to sshd and see that it is exposed on every address."""
    ssh = [s for s in fact(audited, "network.listening") if s["proto"] == "tcp" and int(s["port"]) == 22]
    assert ssh, "sshd's port 22 missing"
    assert {s["process"] for s in ssh} == {"sshd"}
    assert {s["exposure"] for s in ssh} == {"all"}


def test_firewall_matches(audited):
    """A drop policy on input and forward is what keeps a rented host's other services and
    containers off the internet; the audit must read the live ruleset, not a config file."""
    ruleset = json.loads(audited.host.testinfra("root").check_output("nft -j list ruleset"))["nftables"]
    chains = {(c["chain"]["hook"]): c["chain"]["policy"] for c in ruleset if "chain" in c and "hook" in c["chain"]}
    rules = sum(1 for item in ruleset if "rule" in item)
    recorded = fact(audited, "network.firewall.nftables")
    assert sum(1 for item in recorded if "rule" in item) == rules == 3
    firewall = summarise(fact(audited, "network.firewall"))
    assert isinstance(firewall, dict), firewall
    assert firewall["backend"] == "nftables"
    assert firewall["readable"] is True
    assert firewall["input_policy"] == chains["input"] == "drop"
    assert firewall["forward_policy"] == chains["forward"] == "drop"
    assert firewall["rule_count"] == rules


def _passwd(audited: Audited) -> list[list[str]]:
    return [line.split(":") for line in audited.host.testinfra().check_output("getent passwd").splitlines()]


def test_human_accounts_match(audited):
    """Other people's accounts on a rented machine are what isolation has to protect."""
    nologin = ("nologin", "false", "sync", "halt", "shutdown")
    expected = sorted(
        (f[0], int(f[2]), f[5], f[6]) for f in _passwd(audited)
        if 1000 <= int(f[2]) < 65534 and Path(f[6]).name not in nologin
    )
    reported = sorted((a["name"], a["uid"], a["home"], a["shell"]) for a in fact(audited, "isolation.human_accounts"))
    assert reported == expected == [("admin", 1000, "/home/admin", "/bin/bash")]


def test_sudo_members_match(audited):
    """Everyone in sudo can undo any hardening; the audit must list them all."""
    group = audited.host.testinfra().check_output("getent group sudo").split(":")
    members = {m for m in group[3].split(",") if m}
    members |= {f[0] for f in _passwd(audited) if f[3] == group[2]}
    assert set(fact(audited, "isolation.sudo_group_members")) == members == {"admin"}


def test_docker_absent_matches(audited):
    """No Docker yet on a fresh host: the audit must say so, not guess a configuration."""
    has_docker = audited.host.testinfra().exists("dockerd")
    assert fact(audited, "docker.reachable") is False
    assert not has_docker
    assert fact(audited, "docker.unreachable_reason") == "absent"


def test_unattended_upgrades_match(audited):
    """Security updates on an unattended machine only happen if this is on."""
    ti = audited.host.testinfra()
    enabled = ti.check_output("apt-config shell V APT::Periodic::Unattended-Upgrade") == "V='1'"
    assert fact(audited, "packages.unattended_upgrades.installed") is ti.package("unattended-upgrades").is_installed
    assert fact(audited, "packages.unattended_upgrades.enabled") is enabled


def test_gpu_reported_unavailable(audited):
    """No GPU here: NVML must be reported unavailable with a reason (never a fake device)."""
    assert fact(audited, "gpu.nvml.available") is False
    assert fact(audited, "gpu.nvml.reason")
