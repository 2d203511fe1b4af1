"""--redact: identifying values go by what they are (the kind fact_paths declares), from every
output format and from the fleet view; policy text and verdicts stay.

The property tests plant random identifying values of every class in every string field and in a
key of every object of real snapshots, render every format (and the fleet view over several
hosts), and search the output for each planted value. Where a class can only be recognised by its
context (a user name is a user name after ``/home/``, before ``@``, in URL credentials, or in an
account field), it is planted in that context and searched for in it; distinctive values are
searched for bare as well.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hostcheck.cli import app
from hostcheck.fact_paths import declared_child
from hostcheck.facts import from_jsonable, load_snapshot, to_jsonable
from hostcheck.firewall import egress
from hostcheck.policy import load_shipped, resolve_policies
from hostcheck.redact import Redactor, kind_of, outcomes, redact_facts, redacted_report
from hostcheck.render import render
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, run_cli

SNAPSHOT_FILES = sorted(SNAPSHOTS.glob("*.json"))
# A few seconds per property test: each example judges a snapshot twice and renders it. No
# shrinking: a failing example is reported as drawn (shrinking whole snapshots takes minutes).
SETTINGS = settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@cache
def _policies() -> list[Any]:
    return resolve_policies([])


@cache
def _vast() -> list[Any]:
    return [load_shipped("vast")]


@cache
def _snapshot(path: Path) -> str:
    return path.read_text()


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{type(result.exception).__name__}: {result.exception}"
    return result.exit_code, result.output


# ------------------------------------------------------------------ re-judging

@pytest.mark.parametrize("path", SNAPSHOT_FILES, ids=lambda p: p.stem)
def test_redacted_report_rejudges_to_the_same_verdicts(path: Path, tmp_path: Path) -> None:
    facts = load_snapshot(path)
    original = build_report(facts, _policies())
    redacted, changed = redacted_report(facts, _policies(), original)
    assert changed == []
    # The redacted report itself, read back as --facts (what someone it is shared with does).
    saved = tmp_path / "redacted.json"
    saved.write_text(json.dumps(redacted.as_dict()))
    assert outcomes(build_report(load_snapshot(saved), _policies())) == outcomes(original)
    # Policy text is never altered: every title, why and fix reads as the policy wrote it.
    for before, after in zip(original.policies, redacted.policies, strict=True):
        assert (before.title, before.summary) == (after.title, after.summary)
        texts = {f.id: (f.title, f.why, f.fix, f.note) for f in before.findings}
        assert {f.id: (f.title, f.why, f.fix, f.note) for f in after.findings} == texts


# ------------------------------------------------------------------ named cases


def _case_facts() -> dict[str, Any]:
    facts = json.loads(_snapshot(SNAPSHOTS / "reference-laptop.json"))
    facts["meta"]["hostname"] = "gpubox.lab.acme-corp.example"
    facts["isolation"]["human_accounts"] = [
        {"name": "ubuntu", "uid": 1000, "home": "/home/ubuntu", "shell": "/bin/bash"},
        {"name": "x", "uid": 1001, "home": "/home/x", "shell": "/bin/sh"},
    ]
    facts["isolation"]["docker_group_members"] = ["x"]
    facts["isolation"]["credentials"] = [{"kind": "ssh_private_key", "user": "x", "path": "/home/x/.ssh/id_ed25519"}]
    facts["packages"]["apt_sources"]["sources"].append(
        {"type": "deb", "uri": "https://x:s3cretpw@apt.acme-corp.example/repo?token=t0k3nvalue", "suite": "stable"})
    facts["network"]["interfaces"].append(
        {"name": "enx00e04c680a1b", "kind": "wired", "up": True, "mac": "00:e0:4c:68:0a:1b", "addresses": []})
    facts["network"]["default_route"] = {"interface": "enx00e04c680a1b", "gateway": "192.168.7.1", "kind": "wired"}
    facts["network"]["inbound"] = {"probed": False, "ports": [],
                                   "reason": "probe.acme-corp.example:8443 refused the connection from gpubox"}
    facts["network"]["firewall"] = {"nftables": [], "iptables": {
        "filter": [":INPUT DROP [0:0]", "-A INPUT -m iprange --src-range 203.0.113.10-203.0.113.20 -j ACCEPT"],
        "rule_count": 1}}
    facts["system"]["note"] = "backups in /home/ubuntu/old and on gpubox; firmware version 1.2.3.4"
    facts["system"]["gpubox.lab.acme-corp.example"] = {"/home/x": "ok"}
    return facts


def test_type_not_word_redaction(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(_case_facts()))
    code, out = _run(["audit", "--facts", str(path), "-f", "json", "--redact"])
    assert code in (0, 3, 4)
    report = json.loads(out)
    facts = report["facts"]
    accounts = facts["isolation"]["human_accounts"]
    assert [a["name"] for a in accounts] == ["[user-1]", "[user-2]"]
    assert [a["home"] for a in accounts] == ["/home/[user-1]", "/home/[user-2]"]
    assert facts["isolation"]["docker_group_members"] == ["[user-2]"]
    assert facts["isolation"]["credentials"][0]["path"] == "/home/[user-2]/.ssh/id_ed25519"
    # A user called ubuntu is not a word to hunt: os_id and policy text keep "ubuntu" and "x".
    assert facts["system"]["os_id"] == "ubuntu"
    vast = next(p for p in report["policies"] if p["id"] == "vast")
    (unredacted,) = build_report(from_jsonable(_case_facts()), [load_shipped("vast")]).policies
    assert [(f["title"], f["why"], f["fix"]) for f in vast["findings"]] == [
        (f.title, f.why, f.fix) for f in unredacted.findings]
    assert [p["verdict"] for p in report["policies"]] == [
        p.verdict for p in build_report(from_jsonable(_case_facts()), _policies()).policies]
    # Host name by labels: full name, short name, domain.
    assert report["host"]["hostname"] == facts["meta"]["hostname"] == "[host-1]"
    assert "[host-" in facts["network"]["inbound"]["reason"] and "gpubox" not in out and "acme-corp" not in out
    # URL credentials and query string gone; MAC-named interface, addresses and ranges replaced.
    uri = facts["packages"]["apt_sources"]["sources"][-1]["uri"]
    assert "s3cretpw" not in out and "t0k3nvalue" not in out and "@" not in uri and "?" not in uri
    mac = facts["network"]["interfaces"][-1]["mac"]
    assert facts["network"]["interfaces"][-1]["name"] == f"enx{mac}" == facts["network"]["default_route"]["interface"]
    assert "00e04c680a1b" not in out.lower()
    rules = "\n".join(facts["network"]["firewall"]["iptables"]["filter"])
    assert "203.0.113.1" not in rules and re.search(r"--src-range [\d.]+-[\d.]+ ", rules)
    # Same-scope addresses: the gateway stays private, and the note's version stays a version.
    assert ipaddress.ip_address(facts["network"]["default_route"]["gateway"]).is_private
    assert facts["system"]["note"] == "backups in /home/[user-1]/old and on [host-2]; firmware version 1.2.3.4"
    # Keys are scrubbed like values.
    assert facts["system"]["[host-1]"] == {"/home/[user-2]": "ok"}


def test_each_class_by_what_it_is_in_free_text() -> None:
    """The values real machines' facts carry in free text, each replaced by its class; ordinary
    words and versions stay."""
    facts = json.loads(_snapshot(SNAPSHOTS / "reference-laptop.json"))
    facts["isolation"]["human_accounts"] = [{"name": "carol", "uid": 1000, "home": "/home/carol", "shell": "/bin/sh"}]
    facts["power"]["batteries"] = [{"name": "BAT0", "capacity_pct": 80, "status": "carol"}]
    facts["system"]["log"] = [
        "default via 192.168.1.1 dev 203.0.113.77 proto static", "srv=198.51.100.23 answered",
        "lladdr 00e04c680a1b and 00e0.4c68.0a1b", "peer ip-10-44-3-21.ec2.internal",
        "mounted /mnt/carol/models from nas.example.net:/export/carol",
        "HTTPS_PROXY=http://proxy.acme.internal:3128", "registry mirror https://mirror.acme-corp.example/v2",
        "deb http://apt.acme-corp.example/debian and http://deb.debian.org/debian bookworm main",
        "kernel 6.1.0 driver version 550.54.15 status Discharging",
    ]
    out = json.dumps(redact_facts(facts))
    for secret in ("203.0.113.77", "198.51.100.23", "00e04c680a1b", "00e0.4c68.0a1b", "10-44-3-21", "carol",
                   "nas.example.net", "proxy.acme.internal", "acme-corp"):
        assert secret not in out, secret
    log = redact_facts(facts)["system"]["log"]
    assert log[4].startswith("mounted /mnt/[user-1]/models from [host-") and log[4].endswith(":/export/[user-1]")
    assert re.fullmatch(r"peer ip-10-\d+-\d+-\d+\.ec2\.internal", log[3])  # a private address stays in 10/8
    assert "http://deb.debian.org/debian bookworm main" in log[7]  # a public mirror names nobody
    assert log[8] == "kernel 6.1.0 driver version 550.54.15 status Discharging"
    assert redact_facts(facts)["power"]["batteries"][0]["status"] == "[user-1]"
    assert redact_facts(json.loads(_snapshot(SNAPSHOTS / "reference-laptop.json")))["power"]["batteries"] == \
        json.loads(_snapshot(SNAPSHOTS / "reference-laptop.json"))["power"]["batteries"]  # "Charging" is a word


def test_facts_redact_and_every_format(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(_case_facts()))
    for fmt in ("json", "table", "markdown"):
        proc = run_cli("audit", "--facts", str(path), "-f", fmt, "-v", "--redact")
        assert proc.returncode in (0, 3, 4), proc.stderr
        for secret in ("gpubox", "acme-corp", "/home/ubuntu", "/home/x", "s3cretpw", "t0k3nvalue", "00:e0:4c:68:0a:1b",
                       "203.0.113.10", "198.51.100.77", "192.168.1.23"):
            assert secret not in proc.stdout, (fmt, secret)


def test_redactor_address_scopes() -> None:
    redactor = Redactor()
    redactor.public_ranges = [ipaddress.ip_network("198.51.100.0/24")]
    for text, scope in (("10.1.2.3", "private"), ("172.20.0.5", "private"), ("192.168.1.9", "private"),
                        ("100.71.3.4", "shared"), ("169.254.9.9", "link-local"), ("fd12:3456::1", "private"),
                        ("fe80::1c2b:3dff:fe4e:5f60", "link-local"), ("8.8.4.4", "global"), ("198.51.100.7", "global"),
                        ("2a00:1450::1", "global"), ("203.0.113.5", "other")):
        replaced = ipaddress.ip_address(redactor.address_text(text))
        assert replaced != ipaddress.ip_address(text)
        net = {"private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"), "shared": ("100.64.0.0/10",),
               "link-local": ("169.254.0.0/16", "fe80::/10"), "global": tuple(redactor_public()),
               "other": ("240.0.0.0/4", "100::/64")}[scope]
        assert any(replaced.version == n.version and replaced in n for n in map(ipaddress.ip_network, net)), text
    # Same value, same replacement, in every notation; a network keeps its members.
    assert redactor.address_text("[2A00:1450:0:0::1]:22") == f"[{redactor.address_text('2a00:1450::1')}]:22"
    inside, network = redactor.address_text("10.9.8.7"), redactor.address_text("10.9.8.0/24")
    assert ipaddress.ip_address(inside) in ipaddress.ip_network(network)
    for kept in ("127.0.0.1", "::1", "0.0.0.0", "::", "224.0.0.251", "ff02::1"):
        assert redactor.address_text(kept) == kept


def redactor_public() -> list[str]:
    from hostcheck.redact import SUBSTITUTE_PUBLIC_RANGES

    return SUBSTITUTE_PUBLIC_RANGES


# ------------------------------------------------------------------ planted values (property)

LOWER = "abcdefghijkmnpqrstuvwxyz"
TOKEN = st.text(LOWER, min_size=7, max_size=10).map(lambda s: "q" + s)  # distinctive: searched for bare
COMMON_USERS = st.sampled_from(["x", "ubuntu", "pi", "admin", "user", "a", "debian"])


# Public addresses drawn from allocated unicast blocks (no filtering: generation stays fast).
PUBLIC_BLOCKS = {4: ["1.0.0.0/8", "8.0.0.0/7", "45.0.0.0/8", "77.0.0.0/8", "151.0.0.0/8", "185.0.0.0/8"],
                 6: ["2001:4860::/32", "2a00::/12", "2600::/12", "2c0f:f000::/20"]}


def _public(v: int) -> st.SearchStrategy[Any]:
    return st.sampled_from(PUBLIC_BLOCKS[v]).flatmap(lambda n: st.ip_addresses(network=n))


# Addresses hostcheck itself names are not drawn: a block's own network address (policy text,
# "100.64.0.0/10") and the destinations of the container-egress walk (its findings name them).
OWN_ADDRESSES = {probe.daddr for probe in (*egress.PROBES_V4, *egress.PROBES_V6)}
PRIVATE_V4 = st.sampled_from(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"]).flatmap(
    lambda n: st.ip_addresses(network=n)).filter(lambda a: int(a) & 0xFFFF != 0 and str(a) not in OWN_ADDRESSES)
MACS = st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))


@st.composite
def identities(draw: st.DrawFn) -> dict[str, Any]:
    """One host's identifying values, of every class."""
    short, domain_label, tld = draw(TOKEN), draw(TOKEN), draw(st.sampled_from(["com", "net", "de", "io"]))
    mac = draw(MACS)
    octets = [int(x, 16) for x in mac.split(":")]
    eui = bytes([octets[0] ^ 2, *octets[1:3], 0xFF, 0xFE, *octets[3:]])
    link_local = ipaddress.IPv6Address(b"\xfe\x80" + b"\0" * 6 + eui)  # SLAAC EUI-64: the MAC inside
    return {
        "short": short, "domain": f"{domain_label}.{tld}", "fqdn": f"{short}.{domain_label}.{tld}",
        "user": draw(TOKEN), "common_user": draw(COMMON_USERS), "password": draw(TOKEN), "query": draw(TOKEN),
        "server": f"{draw(TOKEN)}.{draw(TOKEN)}.org", "mirror": f"{draw(TOKEN)}.{draw(TOKEN)}.internal",
        "v4": draw(_public(4)), "v4b": draw(_public(4)), "private": draw(PRIVATE_V4), "v6": draw(_public(6)),
        "v6how": draw(st.integers(0, 4)), "mac": mac, "link_local": link_local, "serial": "S" + draw(TOKEN).upper(),
        "uuid": str(draw(st.uuids())),
    }


def _v6_text(address: ipaddress.IPv6Address, how: int) -> str:
    return [address.compressed, address.exploded, address.compressed.upper(), f"{address.compressed}%eth0",
            f"[{address.compressed}]:22"][how]


def _mapped_v6(address: ipaddress.IPv4Address) -> str:
    return f"::ffff:{address}"


def _text_plants(ids: dict[str, Any]) -> list[str]:
    """Free text holding each class in the context that makes it what it is."""
    u, c = ids["user"], ids["common_user"]
    hexmac = ids["mac"].replace(":", "")
    return [
        f"host {ids['short']} in {ids['domain']} ({ids['fqdn']})",
        f"/home/{u}/.ssh and /home/{c}/data",
        f"{c}@{ids['fqdn']} and {u}@{ids['v4']}",
        f"https://{c}:{ids['password']}@{ids['server']}/x?key={ids['query']}",
        f"{ids['server']}:8443 refused; peer {_v6_text(ids['v6'], ids['v6how'])}",
        f"range {ids['v4']}-{ids['v4b']} and {_mapped_v6(ids['v4'])} and {ids['private']}/24",
        f"mac {ids['mac'].upper()} on enx{hexmac} / wlx{hexmac}",
        f"gpu serial {ids['serial']} uuid {ids['uuid']}" if ids.get("serial_field") else f"uuid {ids['uuid']}",
        # Each class again where real machines write it in free text: a route line, key=value,
        # a bare or dotted MAC, an address inside a reverse-DNS name, a user in any path, URL
        # hosts without credentials (a proxy, a registry mirror, an APT source).
        f"default via {ids['private']} dev {ids['v4']} proto static; srv={ids['v4b']}",
        f"lladdr {_cisco_mac(ids['mac'])} {hexmac if re.search('[a-f]', hexmac) else ''} seen",
        f"peer ip-{_hyphens(ids['private'])}.ec2.internal via {_hyphens(ids['v4'])}.isp.example",
        f"/mnt/{c}/models and /srv/{u}/cache and nas.{ids['domain']}:/export/{u}",
        f"HTTPS_PROXY=http://{ids['server']}:3128 mirrors [\"https://{ids['mirror']}/v2\"] deb http://{ids['mirror']}/debian",
    ]


def _cisco_mac(mac: str) -> str:
    hexdigits = mac.replace(":", "")
    return ".".join(hexdigits[i:i + 4] for i in range(0, 12, 4))


def _hyphens(address: ipaddress.IPv4Address) -> str:
    return str(address).replace(".", "-")


def _value_for(kind: str, ids: dict[str, Any], n: int) -> str:
    """A planted value for a field of ``kind``: the class the field holds, or text of identifiers."""
    u = ids["user"] if n % 2 else ids["common_user"]
    by_kind = {
        "host": [ids["fqdn"], f"{ids['server']}:3478"][n % 2],
        "addr": [str(ids["v4"]), _v6_text(ids["v6"], ids["v6how"]), f"{ids['private']}:5000", _mapped_v6(ids["v4b"]),
                 f"{ids['link_local']}%wlan0"][n % 5],
        "user": u, "users": u, "path": f"/home/{u}/models", "mac": ids["mac"], "iface": f"enx{ids['mac'].replace(':', '')}",
        "serial": ids["serial"], "uuid": ids["uuid"], "container": f"C.{ids['user']}",
        "uri": f"http://{u}:{ids['password']}@{ids['server']}/debian?auth={ids['query']}",
    }
    if kind in by_kind:
        return by_kind[kind]
    plants = _text_plants(ids)
    if kind == "value":  # values the checks compare: identifiers, and a learned name as the whole value
        plants = [ids["short"], ids["user"], *plants[1:]]
    return plants[n % len(plants)]


def _plant(facts: Any, ids: dict[str, Any], values: bool = True) -> Any:
    """Every string field (and one key in every object) of ``facts`` holding a planted value;
    ``values``: the values the checks compare and parse too (there a planted address can read
    as a GPU model: ``2C0F:…:B200::`` names a B200)."""
    counter = iter(range(10**9))
    devices = facts.get("gpu", {}).get("devices")
    # A serial is known for one where the facts say it is one; a bare serial in text is not an identifier.
    ids["serial_field"] = isinstance(devices, list) and any(isinstance(d, dict) for d in devices)
    for device in devices if ids["serial_field"] else []:
        if isinstance(device, dict):
            device["serial"] = "planted"

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            if set(value) == {"$unknown"}:
                return {"$unknown": _value_for("text", ids, next(counter))}
            out: dict[str, Any] = {}
            for key, item in value.items():
                child, _ = declared_child(path, str(key))
                out[key] = walk(item, child)
            extra, _ = declared_child(path, "planted")
            out[_value_for("text" if kind_of(extra) == "text" else "value", ids, next(counter))] = "planted"
            return out
        if isinstance(value, list):
            return [walk(item, f"{path}.*") for item in value]
        if isinstance(value, str):
            if path in ("meta.facts_format", "meta.hostcheck_version") or kind_of(path) == "sshd":
                return value
            if kind_of(path) == "value" and not values:
                return value
            return _value_for(kind_of(path), ids, next(counter))
        return value

    planted = walk(facts, "")
    planted["meta"]["hostname"] = ids["fqdn"]
    planted["meta"]["description"] = f"probe {ids['server']}:8443 for {ids['short']}"  # free text names the server
    planted["meta"]["notes"] = _text_plants(ids)  # every class in free text at least once, whatever the cycle hit
    planted["isolation"]["human_accounts"] = [
        {"name": ids["user"], "uid": 1000, "home": f"/home/{ids['user']}", "shell": "/bin/sh"},
        {"name": ids["common_user"], "uid": 1001, "home": f"/home/{ids['common_user']}", "shell": "/bin/sh"},
    ]
    planted["ssh"]["settings"] = {"passwordauthentication": "no",
                                  "allowusers": [f"{ids['common_user']}@{ids['v4']}", ids["user"]],
                                  "listenaddress": [f"[{ids['v6'].compressed}]:22"]}
    return planted


def _searches(ids: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, regex) for every planted value; output must match none."""
    def bare(value: str) -> str:
        return rf"(?<![\w.:-]){re.escape(value)}(?![\w:-])"

    c, u = ids["common_user"], ids["user"]
    hexmac = ids["mac"].replace(":", "")
    v6 = ids["v6"]
    found = [
        ("short name", bare(ids["short"])), ("domain", bare(ids["domain"])), ("fqdn", bare(ids["fqdn"])),
        ("user", bare(u)), ("password", re.escape(ids["password"])), ("query", re.escape(ids["query"])),
        ("server", bare(ids["server"])), ("uuid", re.escape(ids["uuid"])),
        ("common user in a home path", rf"/home/{re.escape(c)}(?![\w.-])"),
        ("common user before @", rf"(?<![\w.-]){re.escape(c)}@"), ("common user in URL", rf"//{re.escape(c)}:"),
        ("mac", re.escape(ids["mac"])), ("mac-", re.escape(ids["mac"].replace(":", "-"))), ("mac hex", re.escape(hexmac)),
        ("private", bare(str(ids["private"]))),
        ("mac dotted", re.escape(_cisco_mac(ids["mac"]))), ("mirror", bare(ids["mirror"])),
        ("common user in a path", rf"/mnt/{re.escape(c)}(?![\w.-])"),
        ("private in a host name", rf"(?<!\d)(?<!\d-){re.escape(_hyphens(ids['private']))}(?!-?\d)"),
    ]
    if ids.get("serial_field"):
        found.append(("serial", re.escape(ids["serial"])))
    for key in ("v4", "v4b"):
        found.append((key, rf"(?<![\d.]){re.escape(str(ids[key]))}(?![\d])"))
        found.append((f"{key} in a host name", rf"(?<!\d)(?<!\d-){re.escape(_hyphens(ids[key]))}(?!-?\d)"))
    for form in {v6.compressed, v6.exploded, ids["link_local"].compressed, ids["link_local"].exploded}:
        found.append(("v6", rf"(?<![\w:]){re.escape(form)}(?![\w:])"))
    return found


def _leaks(text: str, ids: dict[str, Any]) -> list[str]:
    return [what for what, regex in _searches(ids) if re.search(regex, text, re.IGNORECASE)]


@SETTINGS
@given(identities(), st.sampled_from(SNAPSHOT_FILES))
def test_planted_values_never_reach_any_format(ids: dict[str, Any], path: Path) -> None:
    facts = _plant(json.loads(_snapshot(path)), ids)
    original = build_report(from_jsonable(facts), _policies())
    # The plants are there to find (each class in at least one field of the unredacted report).
    assert {"fqdn", "short name", "user", "password", "query", "mac", "mac hex", "v4", "v6", "uuid",
            "common user in a home path", "mac dotted", "mirror", "common user in a path", "private in a host name",
            "v4 in a host name"} | ({"serial"} if ids["serial_field"] else set()) <= set(_leaks(json.dumps(original.as_dict()), ids))
    report, _ = redacted_report(from_jsonable(facts), _policies(), original)
    for fmt in ("json", "table", "markdown"):
        assert _leaks(render(report, fmt, verbose=True), ids) == [], fmt
    assert _leaks(json.dumps(redact_facts(facts)), ids) == []  # hostcheck facts --redact
    # Identifying values where they belong are judged alike before and after redaction.
    identified = from_jsonable(_plant(json.loads(_snapshot(path)), ids, values=False))
    assert redacted_report(identified, _policies(), build_report(identified, _policies()))[1] == []


@settings(SETTINGS, max_examples=5)
@given(st.lists(identities(), min_size=3, max_size=3, unique_by=lambda ids: ids["short"]), st.lists(st.sampled_from(SNAPSHOT_FILES), min_size=3, max_size=3))
def test_fleet_redact_over_several_hosts(hosts: list[dict[str, Any]], paths: list[Path]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        old, new = Path(folder) / "old", Path(folder) / "new"
        for directory in (old, new):
            directory.mkdir()
            for ids, snapshot in zip(hosts[:2], paths, strict=False):
                facts = _plant(json.loads(_snapshot(snapshot)), ids)
                report = build_report(from_jsonable(facts), _vast())
                (directory / f"{ids['fqdn']}.json").write_text(json.dumps(report.as_dict()))
            unreachable = hosts[2]
            (directory / "index.json").write_text(json.dumps([{
                "host": unreachable["fqdn"], "status": "unreachable",
                "message": f"ssh {unreachable['common_user']}@{unreachable['v4']} failed: /home/{unreachable['user']}"}]))
        outputs = [_run(["fleet", str(new), "--redact", "-f", fmt])[1] for fmt in ("table", "markdown", "json")]
        outputs.append(_run(["fleet", "diff", str(old), str(new), "--redact"])[1])
        plain = _run(["fleet", str(new), "-f", "json"])[1]
    assert all(_leaks(plain, ids) for ids in hosts)  # the host column names them unless redacted
    for out in outputs:
        for ids in hosts:
            assert _leaks(out, ids) == [], out[:2000]
    rows = json.loads(outputs[2])["hosts"]
    assert len({r["host"] for r in rows}) == 3 and all(re.fullmatch(r"\[host-\d+\]", r["host"]) for r in rows)


def test_fleet_redact_error_message(tmp_path: Path) -> None:
    report = json.dumps(build_report(load_snapshot(SNAPSHOTS / "dedicated-4090.json"), _vast()).as_dict())
    (tmp_path / "qsecrethost.corp.example.json").write_text(report)
    (tmp_path / "index.json").write_text(json.dumps([{"host": "qsecrethost.corp.example", "status": "unreachable"}]))
    code, out = _run(["fleet", str(tmp_path), "--redact"])
    assert code == 2 and "appears twice" in out and "qsecrethost" not in out and "corp.example" not in out


def test_same_value_same_placeholder_across_fleet() -> None:
    redactor = Redactor()
    a = redact_facts(to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json")), redactor)
    b = redact_facts(to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json")), redactor)
    assert a == b
    # The blocks public addresses were replaced from, and only those, count as public.
    assert copy.deepcopy(a)["network"]["path"]["public_ranges"] == ["192.0.2.0/24"]


def test_servers_the_user_named_go_from_error_texts() -> None:
    facts = to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json"))
    facts["network"]["inbound"] = {"probed": False, "ports": [], "reason": (
        "probe server not reachable: certificate is not valid for 'qprobe.corp.example'")}
    facts["network"]["bandwidth"] = {"measured": False, "server": "https://qprobe.corp.example:8443",
                                     "reason": "the server at https://qprobe.corp.example:8443 does not accept connections"}
    original = build_report(from_jsonable(facts), _vast())
    report, changed = redacted_report(from_jsonable(facts), _vast(), original, servers=["https://qprobe.corp.example:8443"])
    assert changed == [] and "qprobe" not in json.dumps(report.as_dict())
    assert "'[host-" in report.facts["network"]["inbound"]["reason"]


def test_a_gpu_uuid_reads_the_same_in_its_field_and_in_text() -> None:
    facts = to_jsonable(load_snapshot(SNAPSHOTS / "reference-laptop.json"))
    gpu_uuid = "GPU-3f2a9c41-1111-2222-3333-444455556666"
    facts["gpu"]["devices"][0]["uuid"] = gpu_uuid
    facts["gpu"]["devices"][0]["serial"] = "[N/A]"  # what nvidia-smi writes on GeForce cards: identifies nothing
    facts["gpu"]["nvml"]["reason"] = f"device {gpu_uuid.lower()} busy"
    out = redact_facts(facts)
    placeholder = out["gpu"]["devices"][0]["uuid"]
    assert re.fullmatch(r"\[gpu-\d+\]", placeholder) and out["gpu"]["nvml"]["reason"] == f"device {placeholder} busy"
    assert out["gpu"]["devices"][0]["serial"] == "[N/A]"


def test_a_host_name_joined_by_hyphens_goes_and_a_one_letter_name_leaves_words_alone() -> None:
    from hostcheck.redact import Redactor

    redactor = Redactor()
    redactor.learn_host("rig7.acme-corp.example", own=True)
    out = redactor.scrub("backup-rig7.acme-corp.example.timer and rig7-nightly, not rig7x")
    assert "rig7" not in out.replace("rig7x", "") and "acme-corp" not in out
    assert out.endswith("not rig7x")
    short = Redactor()
    short.learn_host("a.example.org", own=True)
    assert short.scrub("a dedicated box in a closet: a.example.org") == "a dedicated box in a closet: [host-1]"
