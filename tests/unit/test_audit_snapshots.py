"""Recorded machine shapes pin the verdicts: these are what a user of each machine is told.

The snapshots are facts files (tests/snapshots/*.json); each says in meta.description which
real machine shape it records. GPU facts cannot be produced on CI (no GPU), so these are
the only place the GPU checks meet realistic values.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from hostcheck.checks import load_registry
from hostcheck.facts import load_snapshot
from hostcheck.models import PolicyResult
from hostcheck.policy import resolve_policies
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, audit_json, hostcheck, policy_result, run_cli

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
        ("reference-laptop", "darkbloom", "not feasible", ["SYS-1050", "SYS-1060"]),
        # The dedicated 4090 box passes Vast's listing but not verification: CUDA 11.8 < 12.0
        # and 16 GiB RAM < 0.95 x 24 GiB VRAM.
        ("dedicated-4090", "vast", "feasible", []),
        ("dedicated-4090", "vast-verified", "not feasible", ["GPU-1030", "SYS-1030"]),
        ("dedicated-4090", "tensordock", "not feasible", ["SYS-1090"]),
        ("dedicated-4090", "salad-linux", "not feasible", ["DOC-1080", "SYS-1050"]),
        ("dedicated-4090", "quickpod", "feasible", []),
        # No NVIDIA GPU at all: the GPU check fails with the PCI evidence.
        ("no-nvidia-desktop", "vast", "not feasible", ["GPU-1010", "GPU-1120", "ISO-1010", "SYS-1050"]),
        ("no-nvidia-desktop", "salad-linux", "not feasible", ["GPU-1010"]),
        ("no-nvidia-desktop", "tensordock", "not feasible", ["GPU-1010", "ISO-1010"]),  # and a personal desktop
    ],
)
def test_verdicts_are_pinned(machine: str, policy: str, verdict: str, blockers: list[str]) -> None:
    code, report = audit_json("--facts", snapshot(machine), "--policy", policy)
    result = policy_result(report, policy)
    assert result["verdict"] == verdict
    assert sorted(result["blockers"]) == blockers
    owner_stop = report["owner_risk"]["rating"] in ("high", "unknown")
    assert code == (3 if not verdict.startswith("feasible") else 4 if owner_stop else 0)


def test_laptop_power_cap_finding_says_what_was_measured() -> None:
    _, report = audit_json("--facts", snapshot("reference-laptop"), "--policy", "salad")
    finding = next(f for f in policy_result(report, "salad")["findings"] if f["id"] == "GPU-1050")
    assert finding["status"] == "fail"
    assert finding["measured"] == 0.36
    assert finding["threshold"] == 0.9
    assert "45 W of 125 W" in finding["detail"]
    assert "Degraded" in finding["why"]
    assert finding["source"]["url"].startswith("https://github.com/SaladTechnologies/")
    assert finding["source"]["checked"] == "2026-12-03"
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


@pytest.mark.parametrize("machine", ["reference-laptop", "dedicated-4090", "no-nvidia-desktop", "mac-mini-m2-sonoma"])
def test_json_reports_validate_against_the_shipped_schema(machine: str) -> None:
    _, report = audit_json("--facts", snapshot(machine))
    jsonschema.validate(report, SCHEMA)
    assert len(report["policies"]) == 10  # every shipped policy but the owner-risk set


def test_every_finding_says_measured_threshold_source_why_and_fix() -> None:
    _, report = audit_json("--facts", snapshot("dedicated-4090"), "--verbose")
    for policy in report["policies"]:
        for finding in policy["findings"]:
            assert finding["why"] and finding["fix"], finding["id"]
            assert finding["source"]["url"].startswith("https://"), finding["id"]
            assert finding["status"] in ("pass", "warn", "fail", "unknown", "skipped", "error")


# --------------------------------------------------------------------------------------
# Host shapes derived from the platforms' own pages: each expectation cites the page.

VAST = "https://github.com/vast-ai/docs/blob/c624622622496828c1ae58edec481bba1f5d675d/host/verification-stages.mdx"
# Vast's listing and verification rules of 2026, read from the merged pull requests' descriptions.
VAST_2026 = "https://github.com/vast-ai/docs/pull/928"
VAST_SSH = "https://github.com/vast-ai/docs/pull/931"
VAST_PREFLIGHT = "https://github.com/vast-ai/vast-cli/blob/55679830a2c2adcf5c7fad08bf08717a9591062a/vastai/cli/self_test/machine_diagnostics.py"
VAST_SELFTEST = "https://github.com/vast-ai/docs/blob/f16f886dda0a8867b7e65907b397dad08a18ce99/host/how-to-self-test.mdx"
DARKBLOOM = "https://github.com/Layr-Labs/d-inference/blob/a2d8e012d2d41749fee762e14dcc23d1fd637e21/docs/provider/hardware-requirements.md"
TENSORDOCK = "https://github.com/tensordock/marketplace-install/blob/edc5117e17e22d16ba59f2ba9ee2a095f9f23a85/install.sh"
TENSORDOCK_DOWNTIME = "https://web.archive.org/web/20261203000000/https://docs.tensordock.com/legal-information/downtime-compensation"
IONET = "https://web.archive.org/web/20261129000000/https://docs.io.net/docs/device-onboarding"
IONET_UPTIME = "https://web.archive.org/web/20261202000000/https://support.io.net/en/support/solutions/articles/156000101702"
SALAD_POWER = "https://github.com/SaladTechnologies/salad-kitchen-docs/blob/a6f581ce352bad9e43f11eb2fc0107940c68968b/content/docs/faq/jobs/pc-power-limiting-faq.md"
RUNPOD_PARTNER = "https://github.com/runpod/docs/blob/7ac75242b4dae59584574c2d3d2a6184cff89d7c/hosting/partner-requirements.mdx"
RUNPOD_CLOSED = "https://github.com/runpod/docs/blob/a900806e253c4f8c16da27d1a4370e72456da4cb/pods/choose-a-pod.mdx"
QUICKPOD = "https://web.archive.org/web/20261129000000/https://docs.quickpod.io/hosting/overview"
NVIDIA_ECC = "https://web.archive.org/web/20261203000000/https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/supported-gpus.html"

SHAPES = [
    # (machine, policy, verdict, exact blockers, findings that must be RISK, must be UNKNOWN, the page)
    ("mac-mini-m2-sequoia", "darkbloom", "feasible", [], [], [], DARKBLOOM),  # Apple Silicon, macOS 15+
    ("mac-mini-m2-sonoma", "darkbloom", "not feasible", ["SYS-1050"], [], [], DARKBLOOM),  # the installer refuses 14
    # No NVIDIA driver exists for current macOS (CUDA 10.2 was the last release for it): GPU-1010 fails
    ("mac-mini-m2-sonoma", "tensordock", "not feasible", ["GPU-1010", "SYS-1140"], [], [], TENSORDOCK),  # Linux KVM hosts only
    ("mac-mini-m2-sonoma", "ionet", "feasible", [], [], [], IONET),  # "or Apple M1-M3"
    ("mac-mini-m2-sonoma", "vast", "not feasible", ["GPU-1010", "GPU-1120", "SYS-1050", "SYS-1150"], [], [], VAST_2026),
    ("macbook-air-m1-ventura", "darkbloom", "not feasible", ["SYS-1050"], [], [], DARKBLOOM),  # macOS 15 minimum
    ("macbook-pro-intel-monterey", "darkbloom", "not feasible", ["SYS-1050", "SYS-1060"], [], [], DARKBLOOM),
    ("macbook-pro-intel-monterey", "ionet", "not feasible", ["GPU-1120"], ["PWR-1010"], [], IONET),
    ("rtx2080-server", "ionet", "not feasible", ["GPU-1120"], [], [], IONET),  # RTX 30xx or newer
    ("rtx2080-server", "vast", "feasible", [], [], [], VAST),  # Maxwell or newer
    ("gtx980-server", "vast", "feasible", [], [], [], VAST_2026),  # Maxwell, 4 GiB: at the floor since 2026
    ("gtx970-maxwell", "vast", "feasible", [], [], [], VAST_2026),
    ("gtx970-maxwell", "vast-verified", "not feasible", ["GPU-1020"], [], [], VAST_PREFLIGHT),  # more than 7 GB
    ("ssh-password-4090", "vast", "feasible", [], [], [], VAST),  # SSH is a verification rule
    ("ssh-password-4090", "vast-verified", "not feasible", ["SSH-1010"], [], [], VAST_SSH),
    ("altra-a6000-arm64", "vast", "not feasible", ["SYS-1040", "SYS-1150"], [], [], VAST_2026),  # x86_64 only, AVX
    ("gtx1080ti-8x-rig", "ionet", "not feasible", ["GPU-1120"], [], [], IONET),
    ("gtx1080ti-8x-rig", "runpod", "not feasible", ["PLAT-1010"], ["GPU-1030", "GPU-1040", "GPU-1120", "SYS-1010"], [], RUNPOD_PARTNER),
    ("dgx-a100-8x-ecc", "tensordock", "feasible", [], [], [], TENSORDOCK),  # IOMMU, KVM, BMC display
    ("dgx-a100-8x-ecc", "runpod", "not feasible", ["PLAT-1010"], ["GPU-1030", "GPU-1040"], [], RUNPOD_PARTNER),
    ("a100-pcie-ecc-off", "dedicated-host", "feasible with risks", [], ["GPU-1130"], [], NVIDIA_ECC),
    ("a100-pcie-ecc-off", "runpod", "not feasible", ["PLAT-1010"], ["GPU-1130"], [], RUNPOD_CLOSED),
    ("hgx-h100-8x", "runpod", "not feasible", ["PLAT-1010"], [], [], RUNPOD_CLOSED),  # meets the partner rules, closed
    ("hgx-h100-8x", "tensordock", "feasible", [], [], [], TENSORDOCK),
    ("laptop-3070-on-battery", "salad", "not feasible", ["GPU-1050", "PWR-1020", "SYS-1050"], ["GPU-1160"], [], SALAD_POWER),
    ("laptop-3070-on-battery", "ionet", "feasible with risks", [], ["PWR-1010", "PWR-1020"], [], IONET_UPTIME),
    # The installer binds every NVIDIA GPU to vfio-pci and blacklists the host's sound and NVIDIA
    # display drivers: a personal machine cannot be a TensorDock host.
    ("laptop-3070-on-battery", "tensordock", "not feasible", ["ISO-1010"], ["PWR-1010", "PWR-1020"], [], TENSORDOCK),
    ("reference-laptop", "tensordock", "not feasible", ["ISO-1010"], ["PWR-1010", "GPU-1060"], [], TENSORDOCK),
    ("laptop-3080ti-maxq-dedicated", "tensordock", "feasible with risks", [], ["GPU-1060", "PWR-1010"], [], TENSORDOCK_DOWNTIME),
    ("mixed-3090-1080ti", "ionet", "not feasible", ["GPU-1120"], [], [], IONET),  # the 1080 Ti is Pascal
    ("vm-guest-virtio-4090", "vast", "undetermined", [], ["SYS-1100"], ["STO-1020"], VAST),  # virtio: not "HDD"
    ("vm-guest-virtio-4090", "tensordock", "not feasible", ["SYS-1080", "SYS-1090", "SYS-1140"], [], [], TENSORDOCK),
    ("rtx3090-vram-in-use", "vast-verified", "feasible with risks", [], ["GPU-1140"], [], VAST_SELFTEST),
    ("rtx3060-x1-riser", "vast-verified", "not feasible", ["GPU-1070"], ["GPU-1150"], [], VAST_PREFLIGHT),
    ("rtx3060-x1-riser", "vast", "feasible with risks", [], ["GPU-1150"], [], VAST),  # one lane per 2.5 TFLOPS
    ("rtx2080ti-cuda117", "vast", "not feasible", ["GPU-1030"], [], [], VAST_PREFLIGHT),  # CUDA >= 11.8
    ("salad-debian-3080-300w", "salad-linux", "feasible with risks", [], ["GPU-1160"], [], SALAD_POWER),
    ("salad-debian-3080-stock", "salad-linux", "feasible", [], [], [], SALAD_POWER),
    ("ubuntu-desktop-dedicated", "vast", "not feasible", ["ISO-1010"], ["SYS-1120"], [], VAST),
    ("ubuntu-2004-server", "vast", "feasible with risks", [], ["SYS-1130"], [], VAST_2026),  # 20.04: a warning
    ("tensordock-4x4090-server", "tensordock", "feasible", [], [], [], TENSORDOCK),
    ("tensordock-vtx-off", "tensordock", "not feasible", ["SYS-1080", "SYS-1140"], [], [], TENSORDOCK),
    ("desktop-sleep-enabled", "quickpod", "feasible with risks", [], ["PWR-1030"], [], QUICKPOD),  # 100 % uptime
    ("tesla-p40-name-only", "vast", "not feasible", ["GPU-1030"], [], [], VAST_PREFLIGHT),  # Pascal, read from the name
    ("tesla-p40-name-only", "ionet", "not feasible", ["GPU-1120"], [], [], IONET),
    ("unnamed-gpu-no-generation", "vast", "undetermined", [], [], ["GPU-1120"], VAST_2026),  # unknown, never a pass
]

_POLICIES = {p.id: p for p in resolve_policies([])}


def _judge(machine: str, policy: str) -> PolicyResult:
    (result,) = build_report(load_snapshot(SNAPSHOTS / f"{machine}.json"), [_POLICIES[policy]]).policies
    return result


@pytest.mark.parametrize(("machine", "policy", "verdict", "blockers", "risks", "unknowns", "page"), SHAPES)
def test_platform_shapes(machine: str, policy: str, verdict: str, blockers: list[str], risks: list[str],
                         unknowns: list[str], page: str) -> None:
    result = _judge(machine, policy)
    assert (result.verdict, sorted(result.blockers)) == (verdict, blockers), result.findings
    assert set(risks) <= set(result.risks)
    assert set(unknowns) <= set(result.unknowns)
    cited = {f.source.url for f in result.findings if f.id in blockers + risks + unknowns}
    assert page in cited or not (blockers + risks + unknowns), cited
    if verdict.startswith("feasible"):
        judged = {f.id for f in result.findings if f.severity == "blocker" and f.status == "pass"}
        assert judged == {f.id for f in result.findings if f.severity == "blocker"}


def test_shape_table_covers_at_least_twenty_new_snapshots() -> None:
    new = {case[0] for case in SHAPES}
    assert len(new) >= 20
    for name in new:
        description = json.loads((SNAPSHOTS / f"{name}.json").read_text())["meta"]["description"]
        assert len(description) > 80, name  # says what real shape it records and where values come from


def test_generation_from_name_is_said_in_the_detail() -> None:
    result = _judge("tesla-p40-name-only", "vast")
    finding = next(f for f in result.findings if f.id == "GPU-1120")
    assert (finding.status, finding.measured) == ("pass", "pascal")
    assert "model name" in finding.detail
    eight = _judge("gtx1080ti-8x-rig", "vast")
    assert "compute capability 6.1" in next(f for f in eight.findings if f.id == "GPU-1120").detail


# --------------------------------------------------------------------------------------
# The headline and exit codes.


def test_laptop_headline_says_do_not_host_and_exits_non_zero() -> None:
    """In fresh processes: the exit codes as the owner's shell sees them."""
    laptop = snapshot("reference-laptop")
    proc = hostcheck("audit", "--facts", laptop)
    assert proc.returncode == 4, proc.stderr
    headline = proc.stdout.splitlines()[0]  # the answer is the first line
    assert headline.startswith("Do not host on this machine as it is: owner risk HIGH")
    assert "ionet" in proc.stdout.split("policy")[0]  # where it would qualify once fixed
    assert hostcheck("audit", "--facts", laptop, "--accept-owner-risk").returncode == 0
    assert hostcheck("audit", "--facts", laptop, "-p", "vast", "--accept-owner-risk").returncode == 3


def test_clean_dedicated_box_exits_zero_for_vast() -> None:
    code, report = audit_json("--facts", snapshot("dedicated-4090"), "--policy", "vast")
    assert code == 0
    assert report["headline"] == "Yes, you can host this machine on vast (feasible); owner risk LOW."


def test_unknown_owner_risk_never_exits_zero(tmp_path) -> None:
    facts = json.loads((SNAPSHOTS / "dedicated-4090.json").read_text())
    facts["isolation"]["unreadable_homes"] = ["/home/sam"]  # audited without root: one home unread
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    code, report = audit_json("--facts", str(path), "--policy", "vast")
    assert report["owner_risk"]["rating"] == "unknown"
    assert code == 4
    assert report["headline"].startswith("Do not host on this machine until its owner risk is known (possibly HIGH")
    assert run_cli("audit", "--facts", str(path), "-p", "vast", "--accept-owner-risk").returncode == 0


def test_headline_names_the_command_that_settles_an_unknown_blocker() -> None:
    _, report = audit_json("--facts", snapshot("reference-laptop"), "-p", "quickpod", "--accept-owner-risk")
    assert "quickpod: run `hostcheck audit --probe URL --probe-fingerprint FP --token-file FILE --probe-port N`" in report["headline"]
    _, unnamed = audit_json("--facts", snapshot("unnamed-gpu-no-generation"), "-p", "vast")
    assert unnamed["headline"].startswith("Not yet known")
    assert "vast: see what could not be judged, by cause, in `hostcheck audit --details`" in unnamed["headline"]


def test_platforms_that_cannot_apply_are_one_line() -> None:
    """Named on the first screen when their reasons would take more than two lines; the reasons
    with the policies in --details."""
    proc = run_cli("audit", "--facts", snapshot("dedicated-4090"))
    assert "Cannot apply: darkbloom, runpod, salad, salad-linux (why: in the details)." in proc.stdout
    assert "Darkbloom — inference provider" not in proc.stdout
    details = run_cli("audit", "--facts", snapshot("dedicated-4090"), "--details").stdout
    assert ("Cannot apply to this machine: darkbloom (Apple Silicon Macs only; runs on macos 15+); "
            "runpod (closed to new hosts); salad (runs on windows 10 or windows 11); "
            "salad-linux (runs on debian 12 or debian 13).") in " ".join(details.split())
    assert "Darkbloom — inference provider" in run_cli("audit", "--facts", snapshot("dedicated-4090"), "-v").stdout
    _, report = audit_json("--facts", snapshot("mac-mini-m2-sequoia"))
    applicable = {p["id"]: p["applicable"] for p in report["policies"]}
    assert applicable["darkbloom"] is True and applicable["tensordock"] is False


def test_the_headline_reads_its_words_from_the_checks_metadata() -> None:
    """Which blockers mean "cannot apply", which owner-risk items say the agent holds root and
    which one another supersedes are each check's own metadata, not a table kept elsewhere."""
    registry = load_registry()
    assert {m.id: m.precondition for m in registry.values() if m.precondition} == {
        "PLAT-1010": "closed to new hosts", "SYS-1050": "runs on {threshold}",
        "SYS-1060": "Apple Silicon Macs only", "SYS-1140": "Linux KVM hosts only", "SYS-1150": "runs on {threshold}"}
    assert {m.id for m in registry.values() if m.says_agent_has_root} == {"AGT-1010", "AGT-1020"}
    superseded = {m.id: m.superseded_by for m in registry.values() if m.superseded_by}
    assert superseded == {"AGT-1010": "OWN-1050"} and set(superseded.values()) <= set(registry)


def test_markdown_report_carries_the_headline() -> None:
    proc = run_cli("audit", "--facts", snapshot("reference-laptop"), "-f", "markdown")
    assert "**Do not host on this machine as it is" in proc.stdout
    assert "Cannot apply to this machine:" in proc.stdout


@pytest.mark.parametrize("machine", ["mac-mini-m2-sonoma", "macbook-air-m1-ventura", "macbook-pro-intel-monterey"])
def test_a_mac_has_no_working_nvidia_gpu_and_says_why(machine: str) -> None:
    """Not unknown: NVIDIA ships no macOS driver (CUDA 10.2 was the last release supporting macOS)."""
    _, report = audit_json("--facts", snapshot(machine), "--policy", "vast")
    finding = next(f for f in policy_result(report, "vast")["findings"] if f["id"] == "GPU-1010")
    assert (finding["status"], finding["measured"]) == ("fail", 0)
    assert "CUDA 10.2" in finding["detail"] and "macOS" in finding["detail"]


# Vast's rules of 2026, each as `hostcheck audit --facts` reports it on the shape it is
# about: (machine, policy, check, severity, status, measured, the source it must cite).
VAST_2026_RULES = [
    # Ubuntu 22.04/24.04 LTS, 20.04 accepted with a warning: listed, with the warning as a risk.
    ("ubuntu-2004-server", "vast", "SYS-1050", "blocker", "pass", "ubuntu 20.04", VAST_2026),
    ("ubuntu-2004-server", "vast", "SYS-1130", "risk", "warn", "ubuntu 20.04", VAST_2026),
    ("ubuntu-2004-server", "vast-verified", "SYS-1130", "risk", "warn", "ubuntu 20.04", VAST_2026),
    # NVIDIA Maxwell or newer with 4 GB: a GTX 970 reports 4096 MiB, 4096 / 1024 = 4.0 GiB >= 4.
    ("gtx970-maxwell", "vast", "GPU-1120", "blocker", "pass", "maxwell", VAST_2026),
    ("gtx970-maxwell", "vast", "GPU-1020", "blocker", "pass", 4096 / 1024, VAST_2026),
    # SSH keys only, password authentication disabled, or verification fails.
    ("ssh-password-4090", "vast-verified", "SSH-1010", "blocker", "fail", "yes", VAST_SSH),
    # x86_64 only.
    ("altra-a6000-arm64", "vast", "SYS-1150", "blocker", "fail", "aarch64", VAST_2026),
    ("altra-a6000-arm64", "vast-verified", "SYS-1150", "blocker", "fail", "aarch64", VAST_2026),
    ("dedicated-4090", "vast", "SYS-1150", "blocker", "pass", "x86_64", VAST_2026),
]


@pytest.mark.parametrize(("machine", "policy", "check", "severity", "status", "measured", "url"), VAST_2026_RULES)
def test_audit_facts_names_the_rule_vast_applies_today_with_its_source(
        machine: str, policy: str, check: str, severity: str, status: str, measured: object, url: str) -> None:
    _, report = audit_json("--facts", snapshot(machine), "--policy", policy)
    (finding,) = [f for f in policy_result(report, policy)["findings"] if f["id"] == check]
    assert (finding["severity"], finding["status"], finding["measured"]) == (severity, status, measured)
    assert finding["source"]["url"] == url
    assert "merged" in finding["source"]["title"] and "description" in finding["source"]["title"]
    # `hostcheck explain` quotes the sentence of the pull request's description the rule rests on.
    (requirement,) = [r for r in _POLICIES[policy].requirements if r.check == check]
    explained = run_cli("explain", check, env={"COLUMNS": "400"}).stdout
    said = (f"published (merged pull request; the quote is from its description), read {requirement.source.checked}: "
            f'"{requirement.source.quote}"')
    assert said in " ".join(explained.split())


def test_secure_boot_state_is_reported_and_its_direction_said_to_be_hostchecks() -> None:
    # The reference laptop boots with Secure Boot on; Vast's published summary names a Secure Boot
    # requirement without its state, so the finding is a risk whose direction hostcheck chose.
    result = _judge("reference-laptop", "vast")
    (finding,) = [f for f in result.findings if f.id == "SYS-1070"]
    assert (finding.severity, finding.status, finding.measured) == ("risk", "warn", "on")
    (requirement,) = [r for r in _POLICIES["vast"].requirements if r.check == "SYS-1070"]
    assert requirement.own_choice and "not published" in requirement.note
    assert "Secure Boot" in requirement.source.quote


def test_a_machine_no_vast_tier_can_take_says_why_once() -> None:
    proc = run_cli("audit", "--facts", snapshot("altra-a6000-arm64"), "--policy", "vast", "--policy", "vast-verified")
    assert proc.returncode == 3
    assert "No platform here can use this machine (runs on x86_64)." in proc.stdout
