"""`hostcheck fleet diff` between two audits of one host shows what drifted in its facts: the
default route's LAN address, gateway, DHCP or static, link speed and duplex, the forwarded range
as measured (NET-1130, NET-1140), the NVIDIA driver's parts, a pending reboot, agent restarts.
Two real reports, written by `hostcheck audit --facts FILE --format json` from a recorded
snapshot with those facts changed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.helpers import SNAPSHOTS, hostcheck
from tests.unit.fleet.test_fleet_reports import write_report

VAST_UNIT = {"name": "vastai.service", "present": True, "enabled": "enabled", "active": True, "active_state": "active",
             "sub_state": "running", "result": "success", "restarts": 0}
VAST = {"id": "vast", "platform": "Vast.ai", "evidence": ["unit vastai.service"], "accounts": [], "units": [VAST_UNIT],
        "update_channel": [], "packages": []}


def _facts(address: str, gateway: str, addressing: str, speed: int, duplex: str, versions: tuple[str, str, str],
           reboot: bool, restarts: int, last_port: int, iface: str = "enp3s0") -> dict[str, Any]:
    facts = json.loads((SNAPSHOTS / "reference-laptop.json").read_text())
    net = facts["network"]
    net["interfaces"] = [{"name": iface, "kind": "wired", "up": True, "mac": "a4:c3:f0:12:34:56",
                          "addresses": [{"address": address, "family": 4, "prefixlen": 24, "scope": "private"}]}]
    net["default_route"] = {"interface": iface, "gateway": gateway, "kind": "wired", "speed_mbps": speed,
                            "duplex": duplex, "addressing": addressing, "addressing_from": "systemd-networkd's lease"}
    net["port_range"] = {"first": 40000, "last": last_port, "count": last_port - 40000 + 1, "source": "agent"}
    kernel_module, library, package = versions
    facts["packages"]["nvidia_versions"] = {"kernel_module": kernel_module, "library": library, "package": package}
    facts["packages"]["reboot_required"] = {"pending": reboot, "packages": ["libnvidia-compute-550"] if reboot else []}
    agent = copy.deepcopy(VAST)
    agent["units"][0]["restarts"] = restarts
    facts["agents"]["installed"] = [agent]
    return facts


def _report(tmp_path: Path, folder: str, facts: dict[str, Any]) -> Path:
    out = tmp_path / folder
    out.mkdir()
    path = tmp_path / f"{folder}-facts.json"
    path.write_text(json.dumps(facts))
    write_report(out, "gpu-box", path)
    return out


def _gpus(tmp_path: Path, folder: str) -> int:
    report = json.loads((tmp_path / folder / "gpu-box.json").read_text())
    return len(report["facts"]["gpu"]["devices"])


def test_fleet_diff_shows_what_drifted_between_two_audits(tmp_path: Path) -> None:
    old = _report(tmp_path, "old", _facts("192.168.1.23", "192.168.1.1", "dhcp", 1000, "full",
                                          ("550.90.07", "550.90.07", "550.90.07"), False, 0, 40199))
    new = _report(tmp_path, "new", _facts("192.168.1.57", "192.168.1.254", "static", 100, "half",
                                          ("550.90.07", "550.107.02", "550.107.02"), True, 12, 40099))
    proc = hostcheck("fleet", "diff", str(old), str(new), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    changes = {c["kind"]: c["detail"] for item in json.loads(proc.stdout) for c in item["changes"]}
    assert changes["lan_address"] == "LAN address: 192.168.1.23 -> 192.168.1.57"
    assert changes["gateway"] == "gateway: 192.168.1.1 -> 192.168.1.254"
    assert changes["addressing"] == "address assignment: dhcp -> static"
    assert changes["link"] == "link: 1000 Mb/s full duplex -> 100 Mb/s half duplex"
    assert changes["nvidia_driver"] == ("NVIDIA driver: module 550.90.07, library 550.90.07, package 550.90.07 -> "
                                        "module 550.90.07, library 550.107.02, package 550.107.02")
    assert changes["reboot_pending"] == "reboot pending: false -> true"
    assert changes["agent_restarts"] == "vastai.service restarts: 0 -> 12"
    # NET-1140 measures ports per GPU: the range's count over the GPUs, to two places.
    per_gpu = {folder: round(count / _gpus(tmp_path, folder), 2) for folder, count in (("old", 200), ("new", 100))}
    assert changes["forwarded_range"] == f"NET-1140 measured {per_gpu['old']} -> {per_gpu['new']}"
    text = hostcheck("fleet", "diff", str(old), str(new)).stdout
    assert "agent_restarts" in text and "vastai.service restarts: 0 -> 12" in text


def test_the_same_facts_twice_show_no_drift(tmp_path: Path) -> None:
    same = ("192.168.1.23", "192.168.1.1", "dhcp", 1000, "full", ("550.90.07",) * 3, False, 3, 40199)
    old, new = _report(tmp_path, "old", _facts(*same)), _report(tmp_path, "new", _facts(*same))  # type: ignore[arg-type]
    proc = hostcheck("fleet", "diff", str(old), str(new), "--format", "json")
    assert (proc.returncode, json.loads(proc.stdout)) == (0, [])


def test_hostile_interface_names_are_bounded_and_escaped(tmp_path: Path) -> None:
    base = ("192.168.1.23", "192.168.1.1", "dhcp", 1000, "full", ("550.90.07",) * 3, False, 0, 40199)
    old_facts = _facts(*base)  # type: ignore[arg-type]
    new_facts = _facts(*base)  # type: ignore[arg-type]
    hostile = "eth0\x1b[2J" + "x" * 5000
    new_facts["agents"]["installed"][0]["units"][0]["name"] = hostile
    new_facts["network"]["default_route"]["gateway"] = "192.168.1.1\x1b]0;owned\x07"
    old, new = _report(tmp_path, "old", old_facts), _report(tmp_path, "new", new_facts)
    proc = hostcheck("fleet", "diff", str(old), str(new))
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) < 300
