"""Drive health (STO-1070..1100): smartctl's JSON as real drives print it, hostile variants, and
the collector run against this machine's real smartctl (no drive with SMART data here; the
VM lane reads a real emulated NVMe drive: tests/lanes/vm/test_vm_lane.py)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors import disk_health
from hostcheck.fact_validation import shape_problems, type_problem
from hostcheck.facts import Unknown, to_jsonable
from hostcheck.judge import run_check
from tests.unprivileged import python_as_nobody

RECORDED = Path(__file__).parents[2] / "recorded"
NVME = json.loads((RECORDED / "smartctl-nvme-samsung-970-media-errors.json").read_text())["output"]
ATA = json.loads((RECORDED / "smartctl-ata-wdc-wd140.json").read_text())["output"]


def parsed(output: Any, exit_status: int = 0, device: str = "/dev/x", vm: str | None = None) -> dict[str, Any]:
    text = output if isinstance(output, str) else json.dumps(output)
    return disk_health.parse_drive(text, exit_status, device, vm)


def verdict(check_id: str, *drives: dict[str, Any], threshold: Any = None) -> tuple[str, Any, str]:
    outcome = run_check(load_registry()[check_id], {"storage": {"smart": {"drives": list(drives)}}}, threshold)
    return outcome.status.value, outcome.measured, outcome.detail


def nvme(**log: Any) -> dict[str, Any]:
    data = copy.deepcopy(NVME)
    data["nvme_smart_health_information_log"].update(log)
    return data


def ata_with(raw: dict[int, Any]) -> dict[str, Any]:
    data = copy.deepcopy(ATA)
    for row in data["ata_smart_attributes"]["table"]:
        if row["id"] in raw:
            row["raw"]["value"] = raw[row["id"]]
    return data


def test_a_real_nvme_drive_that_says_passed_with_media_errors_fails_sto_1090() -> None:
    drive = parsed(NVME, device="/dev/nvme0")
    log = NVME["nvme_smart_health_information_log"]
    assert drive["passed"] is True and drive["protocol"] == "NVMe" and drive["emulated_by"] is None
    assert {f: drive[f] for f in disk_health.NVME_FIELDS} == {f: log[f] for f in disk_health.NVME_FIELDS}
    assert drive["reallocated_sectors"] is None and drive["pending_sectors"] is None
    assert verdict("STO-1070", drive)[0] == "pass"  # the critical warning byte is 0 ...
    status, measured, _ = verdict("STO-1090", drive)
    assert status == "fail" and f"media errors {log['media_errors']}" in measured  # ... yet it corrupts data
    spare_ok = log["available_spare"] >= log["available_spare_threshold"]
    assert verdict("STO-1080", drive)[0] == ("pass" if spare_ok else "fail")
    assert verdict("STO-1100", drive, threshold=100)[0] == ("pass" if log["percentage_used"] < 100 else "fail")


def test_a_real_sata_drive_is_judged_on_its_raw_sector_counts() -> None:
    drive = parsed(ATA, device="/dev/sdb")
    rows = {row["id"]: row["raw"]["value"] for row in ATA["ata_smart_attributes"]["table"]}
    assert (drive["reallocated_sectors"], drive["pending_sectors"]) == (rows[5], rows[197])
    assert all(drive[f] is None for f in disk_health.NVME_FIELDS)
    assert verdict("STO-1070", drive)[:2] == ("pass", "/dev/sdb: SMART PASSED")
    assert verdict("STO-1090", drive)[0] == ("pass" if rows[5] == rows[197] == 0 else "fail")
    assert verdict("STO-1080", drive)[0] == "skipped"  # no NVMe drive: nothing to judge, not a pass
    pending = parsed(ata_with({197: 8}), device="/dev/sdb")  # the drive's FAIL column would still say "-"
    assert verdict("STO-1090", pending)[0] == "fail"


@pytest.mark.parametrize(("spare", "floor"), [(100, 10), (10, 10), (9, 10), (0, 0), (3, 5)])
def test_spare_is_judged_against_the_drives_own_threshold(spare: int, floor: int) -> None:
    drive = parsed(nvme(available_spare=spare, available_spare_threshold=floor))
    assert verdict("STO-1080", drive)[0] == ("pass" if spare >= floor else "fail")


@pytest.mark.parametrize("bits", [0x01, 0x04, 0x08, 0x20])
def test_any_critical_warning_bit_fails(bits: int) -> None:
    status, measured, _ = verdict("STO-1070", parsed(nvme(critical_warning=bits), device="/dev/nvme0"))
    assert status == "fail" and f"0x{bits:02x}" in measured


def test_sata_smart_failed_fails() -> None:
    data = copy.deepcopy(ATA)
    data["smart_status"]["passed"] = False
    assert verdict("STO-1070", parsed(data))[0] == "fail"


HOSTILE_TEXT = {
    "truncated": json.dumps(NVME)[:300],
    "not json": "smartctl 7.3 2022-02-28 r5338\n/dev/nvme0: Permission denied\n",
    "empty": "",
    "a list": "[1, 2]",
    "no smartctl object": json.dumps({k: v for k, v in NVME.items() if k != "smartctl"}),
    "deep": "[" * 100000,
    "huge": json.dumps({"smartctl": {}, "pad": "x" * (disk_health.MAX_OUTPUT + 1)}),
}


@pytest.mark.parametrize("case", HOSTILE_TEXT)
def test_output_that_is_not_whole_smartctl_json_is_unknown_never_a_pass(case: str) -> None:
    drive = parsed(HOSTILE_TEXT[case])
    assert all(isinstance(drive[f], Unknown) for f in ("passed", *disk_health.NVME_FIELDS))
    for check_id in ("STO-1070", "STO-1090"):
        assert verdict(check_id, drive)[0] == "unknown", (check_id, case)


def test_a_drive_smartctl_could_not_open_is_unknown_with_smartctls_own_message() -> None:
    refused = {"json_format_version": [1, 0], "smartctl": {"exit_status": 2, "messages": [
        {"string": "Smartctl open device: /dev/nvme0 failed: Permission denied", "severity": "error"}]}}
    status, _, detail = verdict("STO-1070", parsed(refused, exit_status=2, device="/dev/nvme0"))
    assert status == "unknown" and "Permission denied" in detail


@pytest.mark.parametrize("value", ["0", -1, True, 1.5, 2**70, None, [0]])
def test_a_field_of_the_wrong_kind_is_unknown(value: Any) -> None:
    drive = parsed(nvme(critical_warning=value, media_errors=value))
    assert isinstance(drive["critical_warning"], Unknown) and isinstance(drive["media_errors"], Unknown)
    assert verdict("STO-1070", drive)[0] == "unknown" and verdict("STO-1090", drive)[0] == "unknown"


def test_a_missing_attribute_or_health_log_is_unknown() -> None:
    data = copy.deepcopy(ATA)
    data["ata_smart_attributes"]["table"] = [r for r in data["ata_smart_attributes"]["table"] if r["id"] != 197]
    drive = parsed(data)
    assert "197" in drive["pending_sectors"].reason and verdict("STO-1090", drive)[0] == "unknown"
    no_log = {k: v for k, v in NVME.items() if k != "nvme_smart_health_information_log"}
    assert verdict("STO-1080", parsed(no_log))[0] == "unknown"


def test_one_bad_drive_fails_even_beside_an_unreadable_one() -> None:
    bad = parsed(nvme(media_errors=3), device="/dev/nvme1")
    unreadable = parsed(HOSTILE_TEXT["truncated"], device="/dev/nvme0")
    status, measured, detail = verdict("STO-1090", bad, unreadable)
    assert status == "fail" and "/dev/nvme1" in measured and "/dev/nvme0" in detail


def test_an_emulated_drive_answers_for_the_emulation_only() -> None:
    data = copy.deepcopy(NVME)
    data["model_name"] = "QEMU NVMe Ctrl"
    drive = parsed(data, vm="kvm")
    assert drive["emulated_by"] == "kvm"
    for check_id in ("STO-1070", "STO-1080", "STO-1090"):
        status, _, detail = verdict(check_id, drive)
        assert status == "unknown" and "emulated by kvm" in detail
    assert verdict("STO-1100", drive, threshold=100)[0] == "skipped"


def test_the_vm_lanes_emulated_drive_as_recorded_is_unknown_never_judged() -> None:
    data = json.loads((RECORDED / "smartctl-nvme-qemu-emulated.json").read_text())["output"]
    drive = parsed(data, device="/dev/nvme0", vm="kvm")
    log = data["nvme_smart_health_information_log"]
    assert drive["emulated_by"] == "kvm" and drive["available_spare"] == log["available_spare"]
    for check_id in ("STO-1070", "STO-1080", "STO-1090"):
        assert verdict(check_id, drive)[0] == "unknown"


def test_scan_keeps_only_device_paths_and_plain_types_and_at_most_16() -> None:
    devices = [{"name": f"/dev/sd{chr(97 + i)}", "type": "sat"} for i in range(20)]
    devices[:0] = [{"name": "/etc/shadow", "type": "ata"}, {"name": "/dev/sdz", "type": "sat; reboot"},
                   {"name": 5, "type": "nvme"}, {"name": "/dev/nvme0", "type": "nvme"}, "junk"]
    found = disk_health.parse_scan(json.dumps({"smartctl": {}, "devices": devices}))
    assert not isinstance(found, Unknown)
    assert {"name": "/dev/nvme0", "type": "nvme"} in found and len(found) <= disk_health.MAX_DRIVES
    assert all(d["name"].startswith("/dev/sd") or d["name"] == "/dev/nvme0" for d in found)
    assert all(d["type"] in ("sat", "nvme") for d in found)
    assert isinstance(disk_health.parse_scan("/dev/sda -d sat # not json"), Unknown)


def test_collected_drives_are_the_declared_shape() -> None:
    drives = [parsed(NVME, device="/dev/nvme0"), parsed(ATA, device="/dev/sdb"), parsed("", device="/dev/sdc")]
    facts = to_jsonable({"storage": {"smart": {"drives": drives}}})
    assert [p for p in shape_problems(facts) if not p.endswith("declared, not written")] == []
    assert type_problem(facts) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="the root half of the collector needs root")
def test_the_real_smartctl_here_finds_no_drive_and_says_so() -> None:
    """This machine's disks have no SMART data: unknown with the reason, not an empty pass."""
    result = disk_health.drives()
    assert isinstance(result, Unknown), result
    assert "no drive with SMART data" in result.reason or "not installed" in result.reason
    facts = {"storage": {"smart": {"drives": result}}}
    assert run_check(load_registry()["STO-1070"], facts, None).status.value == "unknown"


def test_without_smartctl_on_the_path_it_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = disk_health.drives()
    assert isinstance(result, Unknown)
    assert "smartctl" in result.reason and ("not installed" in result.reason or "needs root" in result.reason)


def test_without_root_it_is_unknown_needs_root() -> None:
    proc = python_as_nobody("from hostcheck.collectors import disk_health; print(disk_health.drives().reason)",
                            imports=("hostcheck.collectors.disk_health",))
    assert proc.returncode == 0, proc.stderr
    assert "needs root" in proc.stdout
