"""Recorded machine shapes pin the verdicts: these are what a user of each machine is told.

The snapshots are facts files (tests/snapshots/*.json); each says in meta.description which
real machine shape it records. GPU facts cannot be produced on CI (no GPU), so these are
the only place the GPU checks meet realistic values.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.helpers import SNAPSHOTS, audit_json, policy_result

SCHEMA = json.loads((SNAPSHOTS.parent.parent / "hostcheck" / "schema" / "report-v1.json").read_text())


def snapshot(name: str) -> str:
    return str(SNAPSHOTS / f"{name}.json")


@pytest.mark.parametrize(
    ("machine", "policy", "verdict", "blockers"),
    [
        # The reference laptop: Salad refuses a power-limited GPU (45 of 125 W) -- and its
        # consumer client is Windows-only; Vast refuses a machine that is not dedicated.
        ("reference-laptop", "salad", "not feasible", ["GPU-1050", "SYS-1050"]),
        ("reference-laptop", "salad-linux", "not feasible", ["GPU-1050", "SYS-1050"]),
        ("reference-laptop", "vast", "not feasible", ["ISO-1010"]),
        ("reference-laptop", "vast-verified", "not feasible", ["ISO-1010"]),
        ("reference-laptop", "dedicated-host", "not feasible", ["ISO-1010", "OWN-1010"]),
        ("reference-laptop", "runpod", "not feasible", ["PLAT-1010"]),
        ("reference-laptop", "darkbloom", "not feasible", ["SYS-1060"]),
        # The dedicated 4090 box passes Vast's listing but not verification: CUDA 11.8 < 12.0
        # and 16 GiB RAM < 0.95 x 24 GiB VRAM.
        ("dedicated-4090", "vast", "feasible", []),
        ("dedicated-4090", "vast-verified", "not feasible", ["GPU-1030", "SYS-1030"]),
        ("dedicated-4090", "tensordock", "not feasible", ["SYS-1090"]),
        ("dedicated-4090", "salad-linux", "not feasible", ["DOC-1080", "SYS-1050"]),
        ("dedicated-4090", "quickpod", "feasible", []),
        # No NVIDIA GPU at all: the GPU check fails with the PCI evidence.
        ("no-nvidia-desktop", "vast", "not feasible", ["GPU-1010", "ISO-1010", "SYS-1050"]),
        ("no-nvidia-desktop", "salad-linux", "not feasible", ["GPU-1010"]),
        ("no-nvidia-desktop", "tensordock", "not feasible", ["GPU-1010"]),
    ],
)
def test_verdicts_are_pinned(machine: str, policy: str, verdict: str, blockers: list[str]) -> None:
    code, report = audit_json("--facts", snapshot(machine), "--policy", policy)
    result = policy_result(report, policy)
    assert result["verdict"] == verdict
    assert sorted(result["blockers"]) == blockers
    assert code == (0 if verdict.startswith("feasible") else 3)


def test_laptop_power_cap_finding_says_what_was_measured() -> None:
    _, report = audit_json("--facts", snapshot("reference-laptop"), "--policy", "salad")
    finding = next(f for f in policy_result(report, "salad")["findings"] if f["id"] == "GPU-1050")
    assert finding["status"] == "fail"
    assert finding["measured"] == 0.36
    assert finding["threshold"] == 0.9
    assert "45 W of 125 W" in finding["detail"]
    assert "Degraded" in finding["why"]
    assert finding["source"]["url"].startswith("https://github.com/SaladTechnologies/")
    assert finding["source"]["checked"] == "2026-11-29"
    assert finding["fix_role"] == "nvidia_host: nvidia_host_power_limit_w"


def test_laptop_owner_risk_is_high_and_says_why() -> None:
    _, report = audit_json("--facts", snapshot("reference-laptop"))
    risk = report["owner_risk"]
    assert risk["rating"] == "high"
    failed = {row["id"] for row in risk["findings"] if row["status"] == "warn"}
    assert {"OWN-1010", "ISO-1010"} <= failed
    assert "Do not host on this machine" in risk["statement"]


def test_no_gpu_findings_carry_the_nvml_reason() -> None:
    _, report = audit_json("--facts", snapshot("no-nvidia-desktop"), "--policy", "vast-verified")
    findings = {f["id"]: f for f in policy_result(report, "vast-verified")["findings"]}
    assert findings["GPU-1010"]["status"] == "fail"
    assert "no NVIDIA display device" in findings["GPU-1010"]["detail"]
    assert findings["GPU-1020"]["status"] == "unknown"
    assert "libnvidia-ml.so.1 not found" in findings["GPU-1020"]["detail"]


def test_offline_network_facts_are_unknown_never_pass() -> None:
    _, report = audit_json("--facts", snapshot("no-nvidia-desktop"), "--policy", "quickpod")
    findings = {f["id"]: f for f in policy_result(report, "quickpod")["findings"]}
    for check_id in ("NET-1030", "NET-1040"):
        assert findings[check_id]["status"] == "unknown"
        assert "--offline" in findings[check_id]["detail"]


@pytest.mark.parametrize("machine", ["reference-laptop", "dedicated-4090", "no-nvidia-desktop"])
def test_json_reports_validate_against_the_shipped_schema(machine: str) -> None:
    _, report = audit_json("--facts", snapshot(machine))
    jsonschema.validate(report, SCHEMA)
    assert len(report["policies"]) == 10


def test_every_finding_says_measured_threshold_source_why_and_fix() -> None:
    _, report = audit_json("--facts", snapshot("dedicated-4090"), "--verbose")
    for policy in report["policies"]:
        for finding in policy["findings"]:
            assert finding["why"] and finding["fix"], finding["id"]
            assert finding["source"]["url"].startswith("https://"), finding["id"]
            assert finding["status"] in ("pass", "warn", "fail", "unknown", "skipped", "error")
