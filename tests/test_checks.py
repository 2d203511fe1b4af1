"""Checks are pure functions of facts and a threshold: a table pins their exact outcomes,
including the edges where a fact is unknown (never a pass)."""

from __future__ import annotations

from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.facts import Unknown
from hostcheck.judge import run_check

REGISTRY = load_registry()


def gpu(**fields: Any) -> dict[str, Any]:
    device = {"index": 0, "name": "NVIDIA GeForce RTX 4090", "vram_total_mib": 24564, "power_limit_w": 450.0,
              "power_default_w": 450.0, "pcie_gen_max": 4, "pcie_width_current": 16, "is_laptop": False,
              "throttle_reasons": [], "display_active": False, "persistence_mode": True}
    device.update(fields)
    return {"gpu": {"nvml": {"available": True, "reason": None}, "devices": [device], "display_adapters": []}}


CASES = [
    # (check, facts, threshold, status, measured)
    ("GPU-1050", gpu(power_limit_w=45.0, power_default_w=125.0), 0.9, "fail", 0.36),
    ("GPU-1050", gpu(power_limit_w=440.0), 0.9, "pass", 0.98),
    ("GPU-1050", gpu(power_default_w=0.0), 0.9, "unknown", None),
    ("GPU-1050", gpu(power_limit_w=Unknown("not supported by this GPU/driver")), 0.9, "unknown", None),
    ("GPU-1070", gpu(pcie_gen_max=3, pcie_width_current=1), 2.85, "fail", 0.98),
    ("GPU-1070", gpu(pcie_gen_max=3, pcie_width_current=4), 2.85, "pass", 3.94),
    ("GPU-1030", {"gpu": {"cuda_driver_version": "11.8"}}, "12.0", "fail", "11.8"),
    ("GPU-1030", {"gpu": {"cuda_driver_version": "13.2"}}, "12.0", "pass", "13.2"),
    ("GPU-1030", {"gpu": {"cuda_driver_version": Unknown("NVML unavailable")}}, "12.0", "unknown", None),
    ("GPU-1060", gpu(is_laptop=True, laptop_evidence="name contains 'Laptop'"), None, "fail", "laptop GPU"),
    ("GPU-1060", gpu(is_laptop=Unknown("chassis unreadable")), None, "unknown", None),
    ("GPU-1010", {"gpu": {"nvml": {"available": False, "reason": "no driver"}, "display_adapters": [{"vendor": "nvidia"}]}}, 1, "fail", 0),
    ("GPU-1010", {"gpu": {"nvml": {"available": False, "reason": "no driver"}, "display_adapters": Unknown("no sysfs")}}, 1, "unknown", None),
    ("PWR-1030", {"power": {"sleep_targets": {"sleep.target": "masked", "suspend.target": Unknown("no systemd")}}}, None, "unknown", None),
    ("PWR-1030", {"power": {"sleep_targets": {"sleep.target": "masked", "suspend.target": "static"}}}, None, "fail", "1 not masked"),
    ("PWR-1020", {"power": {"battery_present": True, "on_ac": False}}, None, "fail", "on battery"),
    ("PWR-1020", {"power": {"battery_present": False, "on_ac": Unknown("no mains supply listed")}}, None, "pass", "no battery"),
    ("SSH-1010", {"ssh": {"installed": False}}, None, "pass", "no sshd installed"),
    ("SSH-1010", {"ssh": {"installed": True, "source": "sshd -T", "settings": {"passwordauthentication": "yes"}}}, None, "fail", "yes"),
    ("SSH-1010", {"ssh": {"installed": True, "settings": Unknown("permission denied")}}, None, "unknown", None),
    ("SSH-1020", {"ssh": {"installed": True, "settings": {"permitrootlogin": "without-password"}}}, None, "pass", "without-password"),
    ("DOC-1020", {"docker": {"reachable": False, "unreachable_reason": "permission_denied", "no_new_privileges": Unknown("denied"), "daemon_json": Unknown("denied")}}, None, "unknown", None),
    ("DOC-1020", {"docker": {"reachable": False, "unreachable_reason": "not_running", "daemon_json": {"no-new-privileges": True}}}, None, "pass", "on"),
    ("DOC-1070", {"docker": {"reachable": False, "unreachable_reason": "permission_denied"}}, None, "unknown", None),
    ("DOC-1070", {"docker": {"reachable": True, "published_ports": [{"host_ip": "0.0.0.0", "host_port": 8888, "proto": "tcp"}]},
                  "network": {"firewall": {"docker_user_chain_filters": False}}}, None, "fail", 1),
    ("DOC-1080", {"docker": {"reachable": False, "unreachable_reason": "not_running"}}, None, "fail", "Docker installed (not_running)"),
    ("NET-1030", {"network": {"cgnat": {"verdict": "likely", "signals": []}}}, None, "unknown", "likely"),
    ("NET-1030", {"network": {"cgnat": {"verdict": "yes", "signals": [{"name": "ttl_hop", "result": "yes", "evidence": "hop 2 is 100.64.0.1"}]}}}, None, "fail", "CGNAT"),
    ("NET-1040", {"network": {"inbound": {"probed": False, "ports": [], "reason": "no outside probe"}}}, 3, "unknown", None),
    ("NET-1050", {"network": {"nat": {"mapping": "address-and-port-dependent"}, "inbound": {"ports": []}}}, None, "fail", "address-and-port-dependent"),
    ("OWN-1010", {"isolation": {"credentials": [], "unreadable_homes": ["/home/sam"]}}, None, "unknown", 0),
    ("OWN-1040", {"network": {"listening": [{"proto": "tcp", "port": 22, "exposure": "all"}, {"proto": "tcp", "port": 631, "exposure": "loopback"}]},
                  "ssh": {"settings": {"port": ["22"]}}}, 0, "pass", 0),
    ("SYS-1050", {"system": {"os_id": "ubuntu", "os_version_id": "20.04"}}, ["ubuntu 18.04+"], "pass", "ubuntu 20.04"),
    ("SYS-1050", {"system": {"os_id": "ubuntu", "os_version_id": "16.04"}}, ["ubuntu 18.04+"], "fail", "ubuntu 16.04"),
    ("SYS-1050", {"system": {"os_id": "debian", "os_version_id": "13"}}, ["debian 12"], "fail", "debian 13"),
    ("PLAT-1010", {}, "closed", "fail", "not accepting"),
    ("ISO-1010", {"isolation": {"graphical_session": False, "display_manager": None, "credentials": []}}, None, "pass", "no desktop, no personal data found"),
]


@pytest.mark.parametrize(("check_id", "facts", "threshold", "status", "measured"), CASES)
def test_check_outcome(check_id: str, facts: dict[str, Any], threshold: Any, status: str, measured: Any) -> None:
    outcome = run_check(REGISTRY[check_id], facts, threshold)
    assert (outcome.status, outcome.measured) == (status, measured), outcome.detail


def test_every_check_has_metadata_a_person_can_act_on() -> None:
    for check_id, meta in REGISTRY.items():
        assert meta.title and meta.why and meta.fix, check_id
        assert meta.op in (">=", ">", "<=", "<", "==", "!=", "in"), check_id


def test_no_check_passes_on_empty_facts_except_absence_checks() -> None:
    """With nothing known, a check may only pass where absence itself is the answer."""
    thresholds = {"number": 1, "string": "1", "list": ["x"], "bool": True, "none": None}
    passing = sorted(
        cid for cid, meta in REGISTRY.items() if run_check(meta, {}, thresholds[meta.threshold_kind]).status == "pass"
    )
    assert passing == []
