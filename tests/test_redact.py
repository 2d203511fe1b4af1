"""--redact: every identifying value the facts hold is gone from every format, consistently."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hostcheck.redact import redact
from tests.helpers import SNAPSHOTS, hostcheck

LUKS = "3f1c9a2e-5b7d-4e8f-a1c2-9d0e8b7a6c5f"
IDENTIFYING = {
    "hostname": "alex-laptop",
    "short user": "jo",
    "allowusers user": "deploy",
    "allowusers host": "203.0.113.9",
    "mapped v6": "2001:db8:85a3::8a2e:370:7334",
    "link-local v6": "fe80::1c2b:3dff:fe4e:5f60",
    "mapped v4-in-v6": "198.51.100.200",
    "listen v6": "2001:db8::22",
    "nas": "nas01",
    "cifs server": "fileserver",
    "luks uuid": LUKS,
    "serial": "S64ANS0T123456",
    "container": "C.8123456",
}


def hostile_facts() -> dict[str, Any]:
    facts = json.loads((SNAPSHOTS / "reference-laptop.json").read_text())
    facts["meta"]["hostname"] = IDENTIFYING["hostname"]
    facts["isolation"]["human_accounts"].append({"name": "jo", "uid": 1002, "home": "/home/jo", "shell": "/bin/sh"})
    facts["ssh"] = {
        "installed": True, "running": True, "source": "sshd -T",
        "settings": {
            "passwordauthentication": "no", "permitrootlogin": "no", "permitemptypasswords": "no",
            "kbdinteractiveauthentication": "no", "port": "22",
            "allowusers": ["jo", "deploy@203.0.113.9"],
            "listenaddress": ["[2001:db8::22]:22", "0.0.0.0:22"],
        },
    }
    facts["network"]["nat"]["mapped_address"] = "2001:DB8:85A3:0:0:8A2E:370:7334"  # other notation, same address
    facts["network"]["cgnat"]["signals"][0]["evidence"] = (
        "mapped 2001:db8:85a3::8a2e:370:7334 via fe80::1c2b:3dff:fe4e:5f60%wlp0s20f3 and ::ffff:198.51.100.200"
    )
    facts["storage"]["filesystems"].extend([
        {"device": f"/dev/mapper/luks-{LUKS}", "mountpoint": "/data", "fstype": "ext4", "encrypted": True},
        {"device": "nas01:/export/models", "mountpoint": "/mnt/models", "fstype": "nfs4", "encrypted": False},
        {"device": "//fileserver/share", "mountpoint": "/mnt/share", "fstype": "cifs", "encrypted": False},
        {"device": "/dev/disk/by-id/nvme-Samsung_SSD_980_S64ANS0T123456", "mountpoint": "/srv", "fstype": "xfs",
         "encrypted": False},
    ])
    facts["gpu"]["devices"][0]["serial"] = IDENTIFYING["serial"]
    facts["docker"]["published_ports"] = [{"container": "C.8123456", "host_ip": "::", "host_port": 40022, "proto": "tcp"}]
    facts["system"]["note"] = "firmware version 1.2.3.4, agent v10.20.30.40"
    return facts


def leaks(text: str) -> list[str]:
    found = []
    for name, value in IDENTIFYING.items():
        variants = {value, value.upper()}
        if ":" in value:
            import ipaddress

            variants |= {ipaddress.ip_address(value).exploded, ipaddress.ip_address(value).compressed}
        for variant in variants:
            if re.search(rf"(?<![\w.-]){re.escape(variant)}(?![\w-])", text, re.IGNORECASE) or (
                    len(variant) > 6 and variant.lower() in text.lower()):
                found.append(f"{name}: {variant}")
    return found


def test_redaction_removes_every_identifier_consistently() -> None:
    report = {"host": {"hostname": "alex-laptop"}, "facts": hostile_facts()}
    raw = json.dumps(report)
    assert len(leaks(raw)) >= len(IDENTIFYING)  # the fixture does hold them all
    out = redact(report)
    text = json.dumps(out)
    assert leaks(text) == []
    facts = out["facts"]
    # Same value, same placeholder: across notations and between structured fields and free text.
    mapped = facts["network"]["nat"]["mapped_address"]
    assert re.fullmatch(r"\[ip-\d+\]", mapped)
    assert facts["network"]["cgnat"]["signals"][0]["evidence"].startswith(f"mapped {mapped} via ")
    jo = next(a for a in facts["isolation"]["human_accounts"] if a["uid"] == 1002)
    assert jo["home"] == f"/home/{jo['name']}" and facts["ssh"]["settings"]["allowusers"][0] == jo["name"]
    assert re.fullmatch(r"\[user-\d+\]@\[ip-\d+\]", facts["ssh"]["settings"]["allowusers"][1])
    assert facts["ssh"]["settings"]["listenaddress"][1] == "0.0.0.0:22"  # identifies nobody
    devices = [f["device"] for f in facts["storage"]["filesystems"][-4:]]
    assert re.fullmatch(r"/dev/mapper/luks-\[uuid-\d+\]", devices[0])
    assert re.fullmatch(r"\[host-\d+\]:/export/models", devices[1])
    assert re.fullmatch(r"//\[host-\d+\]/share", devices[2])
    assert facts["docker"]["published_ports"][0]["host_ip"] == "::"
    # Version numbers are not addresses.
    assert facts["system"]["note"] == "firmware version 1.2.3.4, agent v10.20.30.40"
    assert facts["gpu"]["driver_version"] == report["facts"]["gpu"]["driver_version"]
    assert facts["meta"]["hostcheck_version"] == report["facts"]["meta"]["hostcheck_version"]


def test_redact_in_every_format(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(hostile_facts()))
    for fmt in ("json", "table", "markdown"):
        proc = hostcheck("audit", "--facts", str(path), "-f", fmt, "-v", "--redact")
        assert proc.returncode in (0, 3, 4), proc.stderr
        assert leaks(proc.stdout) == [], fmt
    json_out = hostcheck("audit", "--facts", str(path), "-f", "json", "--redact").stdout
    # A redacted report is still a report: judge it again, the verdicts hold.
    redacted_facts = tmp_path / "redacted.json"
    redacted_facts.write_text(json_out)
    again = hostcheck("audit", "--facts", str(redacted_facts), "-f", "json")
    before = {p["id"]: p["verdict"] for p in json.loads(json_out)["policies"]}
    assert {p["id"]: p["verdict"] for p in json.loads(again.stdout)["policies"]} == before
