"""The audit on this very machine (no GPU, no Docker daemon, no internet): real collectors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors import CollectContext, CollectorSpec, collect_facts
from hostcheck.fact_paths import FACTS_FORMAT
from hostcheck.facts import Unknown
from hostcheck.judge import run_check
from tests.helpers import REPO, SNAPSHOTS, hostcheck, run_cli

SCHEMA = json.loads((REPO / "hostcheck" / "schema" / "report-v1.json").read_text())


def test_live_offline_audit_reports_and_exits_as_documented() -> None:
    """In a fresh process, as the owner runs it: the report, the exit code and the time it takes."""
    started = time.monotonic()
    proc = hostcheck("audit", "--offline", "--format", "json")
    elapsed = time.monotonic() - started
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    # No NVIDIA GPU here: every NVIDIA platform is not feasible, hence exit 3.
    assert proc.returncode == 3, proc.stderr
    vast = next(p for p in report["policies"] if p["id"] == "vast")
    gpu = next(f for f in vast["findings"] if f["id"] == "GPU-1010")
    assert gpu["status"] == "fail"
    assert "NVML" in gpu["detail"]
    assert report["facts"]["meta"]["offline"] is True
    for key in ("nat", "cgnat", "inbound"):
        assert "--offline" in report["facts"]["network"][key]["$unknown"]
    assert elapsed < 15  # generous: this is a hang guard, not a speed test (see bench/)


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_live_text_formats(fmt: str) -> None:
    proc = run_cli("audit", "--offline", "--format", fmt)
    assert proc.returncode == 3, proc.stderr
    assert "NOT FEASIBLE" in proc.stdout
    assert "Owner risk" in proc.stdout
    if fmt == "markdown":
        assert proc.stdout.startswith("# hostcheck report")
        assert "| policy | verdict | score |" in proc.stdout


def test_exit_codes_gate_on_a_policy() -> None:
    snap = str(SNAPSHOTS / "dedicated-4090.json")
    assert run_cli("audit", "--facts", snap, "--policy", "vast").returncode == 0
    assert run_cli("audit", "--facts", snap, "--policy", "vast-verified").returncode == 3
    # Without --strict one feasible policy is enough; with it every one must be.
    assert run_cli("audit", "--facts", snap, "-p", "vast", "-p", "vast-verified").returncode == 0
    assert run_cli("audit", "--facts", snap, "-p", "vast", "-p", "vast-verified", "--strict").returncode == 3
    assert run_cli("audit", "--format", "yaml").returncode == 2
    assert run_cli("audit", "--timeout", "0").returncode == 2


def test_output_file_and_unwritable_output_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-f", "markdown", "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert out.read_text().startswith("# hostcheck report")
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-o", str(tmp_path / "no" / "such" / "dir.txt"))
    assert proc.returncode == 2
    assert "the report was printed to stdout instead" in proc.stderr
    assert "\nvast " in proc.stdout  # the report, its policy table included


def test_facts_roundtrip_through_a_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "facts.json"
    assert run_cli("facts", "--offline", "-o", str(out)).returncode == 0
    data = json.loads(out.read_text())
    assert data["meta"]["facts_format"] == FACTS_FORMAT
    assert set(data) >= {"gpu", "system", "power", "storage", "isolation", "docker", "ssh", "packages", "network"}
    live = run_cli("audit", "--facts", str(out), "--format", "json")
    assert json.loads(live.stdout)["facts"]["system"] == data["system"]


def test_redact_removes_addresses_names_and_ids() -> None:
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "reference-laptop.json"), "--format", "json", "--redact")
    text = proc.stdout
    for secret in ("alex", "alex-laptop", "192.168.1.23", "198.51.100.77", "a4:c3:f0:12:34:56", "GPU-3f2a9c41", "/home/sam"):
        assert secret not in text, secret
    report = json.loads(text)
    assert report["redacted"] is True
    # Verdicts do not depend on redaction.
    assert next(p for p in report["policies"] if p["id"] == "salad")["blockers"] == ["GPU-1050", "SYS-1050"]


def test_policies_and_explain() -> None:
    listing = run_cli("policies")
    assert listing.returncode == 0
    for name in ("vast", "vast-verified", "salad", "salad-linux", "tensordock", "runpod", "darkbloom", "dedicated-host"):
        assert name in listing.stdout
    assert re.search(r"read 20\d\d-\d\d-\d\d", listing.stdout)  # each policy says when its sources were read
    explain = run_cli("explain", "gpu-1050")
    assert explain.returncode == 0
    assert "Degraded" in explain.stdout and "salad" in explain.stdout and ">= 0.9 ratio" in explain.stdout
    assert run_cli("explain", "NOPE-1").returncode == 2


def test_an_exception_inside_a_check_is_an_error_finding() -> None:
    meta = load_registry()["GPU-1020"]
    # A device list of the wrong shape makes the check raise something other than Missing.
    outcome = run_check(meta, {"gpu": {"devices": [{"vram_total_mib": "lots"}]}}, 7)
    assert outcome.status == "error"
    assert "TypeError" in outcome.detail


def test_collector_timeouts_and_crashes_become_unknown_within_budget() -> None:
    def slow(_ctx: CollectContext) -> dict[str, object]:
        time.sleep(3)
        return {"late": True}

    def broken(_ctx: CollectContext) -> dict[str, object]:
        raise PermissionError("denied")

    specs = [
        CollectorSpec("slow", "gpu", 0.3, False, slow),
        CollectorSpec("broken", "system", 1.0, False, broken),
        CollectorSpec("fine", "power", 1.0, False, lambda _ctx: {"on_ac": True}),
        CollectorSpec("net", "network", 1.0, True, lambda _ctx: {"nat": "sent packets"}),
    ]
    started = time.monotonic()
    facts = collect_facts(CollectContext(offline=True, budget_s=2.0), specs=specs)
    assert time.monotonic() - started < 1.5
    assert facts["gpu"] == Unknown("collector 'slow' timed out after 0.3s")
    assert isinstance(facts["system"], Unknown) and "PermissionError: denied" in facts["system"].reason
    assert facts["power"] == {"on_ac": True}
    assert isinstance(facts["network"], Unknown) and "--offline" in facts["network"].reason


def test_overall_budget_caps_every_collector() -> None:
    specs = [CollectorSpec("slow", "gpu", 30.0, False, lambda _ctx: time.sleep(5) or {})]
    started = time.monotonic()
    facts = collect_facts(CollectContext(budget_s=0.5), specs=specs)
    assert time.monotonic() - started < 1.5
    assert facts["gpu"] == Unknown("overall audit budget of 0.5s ran out")


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a mount namespace (CI runs as root)")
def test_audit_completes_with_a_read_only_root_filesystem() -> None:
    """The audit writes nothing: with / remounted read-only in a private mount namespace it still reports."""
    assert shutil.which("unshare")
    script = "mount -o remount,bind,ro / && touch /hostcheck-ro-probe 2>/dev/null && echo WRITABLE; exec \"$@\""
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
         sys.executable, "-m", "hostcheck.cli", "audit", "--offline", "--format", "json"],
        capture_output=True, text=True, timeout=60, cwd=REPO, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert "WRITABLE" not in proc.stdout
    report = json.loads(proc.stdout)
    assert proc.returncode == 3, proc.stderr
    assert len(report["policies"]) == 10
    assert not Path("/hostcheck-ro-probe").exists()
