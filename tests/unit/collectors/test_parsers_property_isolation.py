"""Property tests: the isolation/docker/ssh/packages/network parsers never raise on any input,
and keep their invariants on well-formed input."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hostcheck.collectors import accounts, docker_daemon, network_local, packages, sshd
from hostcheck.facts import Unknown
from hostcheck.firewall import ruleset, summary
from hostcheck.knowledge import routes
from hostcheck.knowledge.netaddr import classify_address

SCOPES = {"loopback", "link-local", "private", "cgnat", "global", "other"}
FIREWALL_KEYS = {"backend", "readable", "ufw", "profile_table", "input_policy", "forward_policy", "rule_count",
                 "docker_user_chain_filters"}

any_text = st.text(max_size=2000)
# Text shaped like the files: the parsers' separators and keywords turn up often.
line_soup = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from(list(":,#=x0123456789abcdef \t\"'/{};*\n-+")), max_size=60),
        st.sampled_from(["Package: nvidia-driver-535", "Status: hold ok installed", "Status: install ok",
                         "", "PasswordAuthentication yes", "Match all", "Match User x", "Port 22",
                         "Include *.conf", "root:x:0:0:root:/root:/bin/bash", "docker:x:999:a,b",
                         "APT::Periodic::Unattended-Upgrade \"1\";", "APT {", "};", "/*", "*/", "//"]),
        st.text(max_size=40),
    ),
    max_size=40,
).map("\n".join)
texts = st.one_of(any_text, line_soup)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.one_of(st.sampled_from(["nftables", "table", "chain", "rule", "family", "table", "name",
                                       "hook", "policy", "expr", "drop", "reject", "return", "jump",
                                       "counter", "accept", "Names", "Ports", "PublicPort"]),
                      st.text(max_size=8)),
            children, max_size=6),
    ),
    max_leaves=40,
)
nftish = st.one_of(
    json_values.map(json.dumps),
    st.lists(json_values, max_size=8).map(lambda items: json.dumps({"nftables": items})),
    any_text,
)


@given(texts)
def test_parse_sshd_T_never_raises(text: str) -> None:
    result = sshd.parse_sshd_T(text)
    assert all(k == k.lower() for k in result)
    assert all(isinstance(v, (str, list)) for v in result.values())


@settings(max_examples=60, deadline=None)
@given(line_soup)
def test_effective_from_files_never_raises(text: str) -> None:
    # Relative Include patterns resolve inside this private directory only.
    with tempfile.TemporaryDirectory() as tmp:
        main = Path(tmp) / "sshd_config"
        main.write_text(text.replace("/", "_"), encoding="utf-8")
        result, files_read, _problems = sshd.effective_from_files(main)
    assert files_read and files_read[0] == str(main)
    assert set(sshd.DEFAULTS) <= set(result)


@given(nftish)
def test_nft_json_summary_never_raises(text: str) -> None:
    result = summary.summarise({"nftables": ruleset.parse_nft_ruleset(text), "iptables": None})
    assert isinstance(result, Unknown) or set(result) == FIREWALL_KEYS
    if isinstance(result, dict):
        assert result["input_policy"] in ("drop", "accept", "none")
        assert result["forward_policy"] in ("drop", "accept", "none")


@given(texts)
def test_iptables_save_summary_never_raises(text: str) -> None:
    kept = ruleset.keep_iptables_save(text)
    result = summary.summarise({"nftables": None, "iptables": kept})
    assert result is kept if isinstance(kept, Unknown) else set(result) == FIREWALL_KEYS


@given(texts)
def test_passwd_and_group_never_raise(text: str) -> None:
    entries = accounts.parse_passwd(text)
    groups = accounts.parse_group(text)
    humans = accounts.human_accounts(entries)
    assert all(1000 <= h["uid"] < 65534 for h in humans)
    members = accounts.group_members(groups, entries, accounts.SUDO_GROUPS)
    assert members == sorted(set(members))


names = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=12)


@given(st.lists(st.tuples(names, st.integers(0, 70000), st.integers(0, 70000),
                          st.sampled_from(["/bin/bash", "/usr/sbin/nologin", "/bin/false", "/bin/zsh"])),
                max_size=20))
def test_passwd_well_formed_round_trip(rows: list[tuple[str, int, int, str]]) -> None:
    text = "\n".join(f"{n}:x:{uid}:{gid}:gecos:/home/{n}:{sh}" for n, uid, gid, sh in rows)
    entries = accounts.parse_passwd(text)
    assert [(e.name, e.uid, e.gid, e.shell) for e in entries] == rows
    expected = [n for n, uid, _gid, sh in rows
                if 1000 <= uid < 65534 and sh not in ("/usr/sbin/nologin", "/bin/false")]
    assert [h["name"] for h in accounts.human_accounts(entries)] == expected


@given(texts)
def test_dpkg_status_and_apt_conf_never_raise(text: str) -> None:
    pkgs = packages.parse_dpkg_status(text)
    installed, held = packages.nvidia_packages(pkgs)
    assert set(held) <= set(installed)
    conf = packages.parse_apt_conf(text)
    assert all(k == k.lower() for k in conf)
    packages.periodic_enabled(conf.get(packages.UNATTENDED_KEY))


@given(texts)
def test_proc_net_parsers_never_raise(text: str) -> None:
    for route in routes.parse_proc_net_route(text) + routes.parse_proc_net_ipv6_route(text):
        assert set(route) == {"interface", "gateway", "metric"}
    for proto in ("tcp", "udp"):
        for family in (4, 6):
            for sock in network_local.parse_proc_net_sockets(text, proto, family):
                assert network_local.exposure(sock["address"]) in ("loopback", "all", "specific")


hex_word = st.integers(0, 2**32 - 1).map(lambda n: f"{n:08X}")


@given(st.lists(st.tuples(st.sampled_from(["eth0", "wlan0", "br0"]), hex_word, hex_word,
                          st.integers(0, 0xFFFF), st.integers(0, 10000), hex_word), max_size=10))
def test_proc_net_route_only_up_default_routes(rows: list[tuple[str, str, str, int, int, str]]) -> None:
    header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
    text = header + "".join(f"{i}\t{d}\t{g}\t{f:04X}\t0\t0\t{m}\t{mask}\t0\t0\t0\n" for i, d, g, f, m, mask in rows)
    found = routes.parse_proc_net_route(text)
    wanted = [r for r in rows if int(r[1], 16) == 0 and int(r[5], 16) == 0 and r[3] & 1 and not r[3] & 0x200]
    assert len(found) == len(wanted)
    assert [r["metric"] for r in found] == sorted(r["metric"] for r in found)


@given(st.one_of(st.text(max_size=50), st.ip_addresses().map(str)),
       st.lists(st.one_of(st.text(max_size=20), st.sampled_from(["10.0.0.0/8", "2001:db8::/32"])), max_size=3))
def test_classify_address_total(addr: str, ranges: list[str]) -> None:
    assert classify_address(addr, ranges) in SCOPES


@given(json_values)
def test_docker_api_shapes_never_raise(value: Any) -> None:
    docker_daemon.parse_security_options(value)
    for port in docker_daemon.published_ports(value):
        assert set(port) == {"container", "host_ip", "host_port", "proto"}
    if isinstance(value, dict):
        out = docker_daemon.settings_from_config(value, {})
        assert isinstance(out["icc"], bool) and isinstance(out["runtimes"], list)
