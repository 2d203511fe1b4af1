"""Vast's self-test, check by check, against hostcheck's: the map is data (policies/selftest/vast.yaml),
docs/audit.md's table is what it generates, and every check it names exists and is judged for Vast."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hostcheck.errors import PolicyError
from hostcheck.policy import load_shipped, shipped_policy_names
from hostcheck.selftest_map import NOT_PREDICTED_TEXT, NotPredicted, Stage, load_selftest_map, parse_selftest_map
from tests.helpers import SNAPSHOTS, audit_json, policy_result, run_cli

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gen_selftest_doc  # noqa: E402

# Read from vast-cli at the commit the map's sources pin: the `id` of every check
# preflight_requirement_checks and no_offer_failure build (machine_diagnostics.py), and
# RUNTIME_FAILURE_CODES (runtime_diagnostics.py).
PREFLIGHT_IDS = {"offer.available", "cuda.version", "reliability", "network.direct_ports", "pcie.bandwidth",
                 "network.download", "network.upload", "gpu.ram", "system.ram", "cpu.cores",
                 "network.direct_ports.recommended_max"}
RUNTIME_CODES = {"instance_create_failed", "instance_create_missing_contract", "instance_status_error",
                 "instance_status_poll_failed", "instance_start_timeout", "instance_offline_before_test",
                 "missing_public_ip", "progress_port_not_mapped", "progress_endpoint_unreachable",
                 "progress_endpoint_lost", "progress_empty_timeout", "runtime_test_timeout", "legacy_progress_error",
                 "docker_pull_failed", "daemon_startup_failed", "nvml_failed", "resnet_failed", "ecc_failed",
                 "nccl_failed", "stress_gpu_burn_failed", "interrupted", "cleanup_failed"}
VAST_CLI = "https://github.com/vast-ai/vast-cli/blob/55679830a2c2adcf5c7fad08bf08717a9591062a/vastai/cli/self_test/"


def test_every_self_test_check_is_mapped_once() -> None:
    selftest = load_selftest_map("vast")
    assert {c.id for c in selftest.checks if c.stage == Stage.PREFLIGHT} == PREFLIGHT_IDS
    assert {c.id for c in selftest.checks if c.stage == Stage.RUNTIME} == RUNTIME_CODES
    assert {s.url for s in selftest.sources.values()} == {VAST_CLI + "machine_diagnostics.py",
                                                          VAST_CLI + "runtime_diagnostics.py"}


def test_what_needs_the_gpu_under_load_is_said_not_predicted() -> None:
    selftest = load_selftest_map("vast")
    load = {c.id for c in selftest.checks if c.not_predicted == NotPredicted.GPU_LOAD}
    assert {"resnet_failed", "ecc_failed", "nccl_failed", "stress_gpu_burn_failed"} <= load
    assert all(c.answer == NOT_PREDICTED_TEXT[NotPredicted.GPU_LOAD] for c in selftest.checks if c.id in load)
    assert NOT_PREDICTED_TEXT[NotPredicted.GPU_LOAD].startswith("not predicted: needs the GPU under load")


def test_every_predicting_check_is_judged_by_a_plain_audit() -> None:
    # A plain `hostcheck audit` judges every shipped policy; most of these are Vast's own.
    judged = {r.check for name in shipped_policy_names() for r in load_shipped(name).requirements}
    predicting = {check for c in load_selftest_map("vast").checks for check in c.predicted_by or []}
    assert predicting and predicting <= judged, predicting - judged
    vast = {r.check for name in ("vast", "vast-verified") for r in load_shipped(name).requirements}
    preflight = {check for c in load_selftest_map("vast").checks if c.stage == Stage.PREFLIGHT
                 for check in c.predicted_by or []}
    assert preflight <= vast, preflight - vast  # every preflight gate is judged for Vast itself


def test_the_preflight_gates_are_predicted_by_the_checks_of_the_same_quantity() -> None:
    answers = {c.id: c.predicted_by for c in load_selftest_map("vast").checks}
    assert answers["cuda.version"] == ["GPU-1030"]
    assert answers["gpu.ram"] == ["GPU-1020"]
    assert answers["system.ram"] == ["SYS-1030"]
    assert answers["cpu.cores"] == ["SYS-1010"]
    assert answers["pcie.bandwidth"] == ["GPU-1070"]


def test_a_finding_carries_what_the_self_test_reports_for_a_check() -> None:
    # The self-test's actual / required / operator / unit are a finding's measured / threshold / op / unit.
    _, report = audit_json("--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", "vast-verified")
    (finding,) = [f for f in policy_result(report, "vast-verified")["findings"] if f["id"] == "GPU-1030"]
    assert (finding["measured"], finding["threshold"], finding["op"]) == ("11.8", "12.0", ">=")
    assert "unit" in finding


def test_explain_names_the_self_test_checks_a_check_predicts() -> None:
    out = run_cli("explain", "NET-1040", env={"COLUMNS": "200"}).stdout
    assert ("Predicts these checks of Vast's self-test (`vastai self-test machine`; docs/audit.md has them all): "
            "network.direct_ports (preflight); progress_port_not_mapped (runtime).") in " ".join(out.split())
    assert "Predicts these checks" not in run_cli("explain", "SYS-1060", env={"COLUMNS": "200"}).stdout


def test_the_table_in_docs_audit_md_is_what_the_map_generates() -> None:
    text = gen_selftest_doc.DOC.read_text(encoding="utf-8")
    assert gen_selftest_doc.regenerate(text) == text, f"regenerate with `{gen_selftest_doc.REGENERATE}`"
    assert "| preflight | `gpu.ram` | GPU RAM | `GPU-1020` VRAM per GPU |" in text
    emptied = gen_selftest_doc.TABLE.sub(lambda m: m.group(1) + m.group(4), text)
    assert gen_selftest_doc.regenerate(emptied) == text
    assert gen_selftest_doc.main(["--check"]) == 0


MAP = """format: 1
platform: Vast.ai
command: vastai self-test machine
sources:
  s:
    title: a page
    url: https://github.com/o/r/blob/0123abc/page.py
    checked: 2026-12-07
    status: published
    quote: "the sentence"
checks:
  - {{id: gpu.ram, stage: preflight, title: GPU RAM, source: {source}{answer}}}
"""


@pytest.mark.parametrize(("source", "answer", "error"), [
    ("s", "", "give either 'predicted_by' or 'not_predicted'"),
    ("s", ", predicted_by: [GPU-1020], not_predicted: gpu-load", "give either 'predicted_by' or 'not_predicted'"),
    ("s", ", predicted_by: []", "lists at least one check id"),
    ("s", ", predicted_by: [GPU-9990]", "unknown check id GPU-9990"),
    ("s", ", not_predicted: maybe", "checks.0.not_predicted"),
    ("t", ", predicted_by: [GPU-1020]", "source 't' is not a key of 'sources'"),
])
def test_a_map_that_breaks_the_format_is_refused(source: str, answer: str, error: str) -> None:
    with pytest.raises(PolicyError, match=error.replace("[", r"\[").replace(".", r"\.")):
        parse_selftest_map(MAP.format(source=source, answer=answer), "t.yaml")


def test_a_map_that_is_not_yaml_is_refused_with_its_file() -> None:
    with pytest.raises(PolicyError, match="t.yaml: not readable as YAML"):
        parse_selftest_map("checks: [unclosed", "t.yaml")
