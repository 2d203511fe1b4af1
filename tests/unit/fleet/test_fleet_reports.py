"""`hostcheck fleet` over report files: the table and the diff name exactly the differences.

The lab version (8 nspawn hosts audited through playbooks/audit.yml) is in
tests/lanes/fleet/; this module pins the reading, sorting and diffing on recorded reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hostcheck.cli import app
from tests.helpers import SNAPSHOTS, run_cli


def write_report(folder: Path, host: str, snapshot: str | Path) -> None:
    facts = snapshot if isinstance(snapshot, Path) else SNAPSHOTS / f"{snapshot}.json"
    proc = run_cli("audit", "--facts", str(facts), "--format", "json", "-o", str(folder / f"{host}.json"))
    assert proc.returncode in (0, 3, 4), proc.stderr


@pytest.fixture()
def fleet_dirs(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    for folder in (old, new):
        write_report(folder, "laptop", "reference-laptop")
    write_report(old, "box-a", "dedicated-4090")
    write_report(old, "box-b", "dedicated-4090")
    # What playbooks/audit.yml writes beside the reports.
    (new / "index.json").write_text(json.dumps([
        {"host": "box-a", "status": "no-blocker", "rc": 0, "report": "box-a.json", "message": ""},
        {"host": "box-b", "status": "unreachable", "rc": None, "report": None, "message": "ssh: connect timed out"},
        {"host": "laptop", "status": "blockers", "rc": 3, "report": "laptop.json", "message": ""},
    ]))
    # box-a drifts: a new service listens on all interfaces.
    facts = json.loads((SNAPSHOTS / "dedicated-4090.json").read_text())
    facts["network"]["listening"].append({"proto": "tcp", "address": "0.0.0.0", "port": 8080, "process": "python3", "exposure": "all"})
    drifted = tmp_path / "box-a-facts.json"
    drifted.write_text(json.dumps(facts))
    write_report(new, "box-a", drifted)
    return old, new


def test_fleet_table_lists_failing_and_unreachable_hosts_first(fleet_dirs: tuple[Path, Path]) -> None:
    _, new = fleet_dirs
    proc = run_cli("fleet", str(new), "--policy", "vast", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [row["host"] for row in data["hosts"]] == ["box-b", "laptop", "box-a"]
    assert data["hosts"][0] == {"host": "box-b", "reachable": False, "reason": "unreachable: ssh: connect timed out", "policies": {}}
    laptop = data["hosts"][1]
    assert list(laptop) == ["host", "reachable", "hostcheck_version", "generated_at", "owner_risk", "gpu", "vram_gib",
                            "power", "gpu_reason", "bandwidth", "policies"]
    assert laptop["policies"]["vast"]["verdict"] == "not feasible"
    assert laptop["policies"]["vast"]["blockers"] == ["ISO-1010"]
    assert (laptop["gpu"], laptop["vram_gib"], laptop["power"], laptop["owner_risk"]) == (
        "1x NVIDIA GeForce RTX 3080 Ti Laptop GPU", 16.0, "45/125 W", "high")
    # `fleet DIR` is `fleet table DIR`, the options before or after the directory.
    for args in (["-p", "vast", "--format", "json", str(new)], ["table", str(new), "--policy", "vast", "-f", "json"]):
        result = CliRunner().invoke(app, ["fleet", *args])
        assert (result.exit_code, result.output) == (0, proc.stdout), args
    table = run_cli("fleet", str(new), "-p", "vast", env={"COLUMNS": "200"}).stdout  # the full table
    # The table shows each host's score as its report gives it (the score's rule: test_checks).
    box_a = data["hosts"][2]["policies"]["vast"]["score"]
    assert "UNREACHABLE" in table and f"NO {laptop['policies']['vast']['score']} [ISO-1010]" in table
    assert f"ok {box_a}" in table
    # At 80 columns, one line per host: its owner risk and the policies that would take it.
    narrow = run_cli("fleet", str(new), "-p", "vast", env={"COLUMNS": "80"}).stdout.splitlines()
    assert narrow[1].startswith("box-b") and "UNREACHABLE" in narrow[1]
    assert narrow[2].split() == ["laptop", "high", "none"]
    assert narrow[3].split() == ["box-a", data["hosts"][2]["owner_risk"], "vast"]


def test_fleet_diff_names_exactly_the_drift(fleet_dirs: tuple[Path, Path]) -> None:
    old, new = fleet_dirs
    proc = run_cli("fleet", "diff", str(old), str(new), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    changes = {item["host"]: item["changes"] for item in json.loads(proc.stdout)}
    assert set(changes) == {"box-a", "box-b"}
    assert changes["box-b"] == [{"kind": "reachability", "detail": "no report: unreachable: ssh: connect timed out"}]
    kinds = [(c["kind"], c["detail"]) for c in changes["box-a"]]
    assert ("new_listening", "tcp/8080 on 0.0.0.0") in kinds
    regressed = {c["check"] for c in changes["box-a"] if c["kind"] == "finding_regressed"}
    assert regressed == {"OWN-1040"}


def test_a_damaged_report_names_its_file_and_field(tmp_path: Path) -> None:
    write_report(tmp_path, "good", "dedicated-4090")
    report = json.loads((tmp_path / "good.json").read_text())
    report["policies"][1]["findings"][0]["status"] = "fine"
    (tmp_path / "damaged.json").write_text(json.dumps(report))
    proc = run_cli("fleet", str(tmp_path), "-f", "json")
    assert proc.returncode == 2
    assert (f"{tmp_path / 'damaged.json'}: not a usable hostcheck report: policies[1].findings[0].status: "
            "input should be 'pass', 'warn', 'fail', 'unknown', 'skipped' or 'error'") in proc.stderr
    rows = {row["host"]: row for row in json.loads(proc.stdout)["hosts"]}
    assert rows["damaged"]["report_error"] is True and rows["good"]["reachable"] is True


def test_fleet_refuses_other_report_versions(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text(json.dumps({"report_version": 0, "tool": {"version": "0.0.1"}}))
    proc = run_cli("fleet", str(tmp_path))
    assert proc.returncode == 2
    assert "report format 0 (written by hostcheck 0.0.1); this hostcheck reads format 1" in proc.stderr


def test_fleet_without_reports_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("fleet", str(tmp_path))
    assert proc.returncode == 2 and "no reports" in proc.stderr


def test_fleet_diff_matches_the_same_host_under_any_file_names(tmp_path: Path) -> None:
    """before.json and after.json of one machine are one host that drifted, not a host removed
    and another added: reports are matched by the host that wrote them."""
    write_report(tmp_path, "before", "dedicated-4090")
    facts = json.loads((SNAPSHOTS / "dedicated-4090.json").read_text())
    facts["network"]["listening"].append({"proto": "tcp", "address": "0.0.0.0", "port": 8080, "process": "python3",
                                          "exposure": "all"})
    drifted = tmp_path / "drifted-facts.json"
    drifted.write_text(json.dumps(facts))
    write_report(tmp_path, "after", drifted)
    proc = run_cli("fleet", "diff", str(tmp_path / "before.json"), str(tmp_path / "after.json"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    drift = json.loads(proc.stdout)
    assert [item["host"] for item in drift] == [facts["meta"]["hostname"]]
    kinds = {(c["kind"], c.get("detail")) for c in drift[0]["changes"]}
    assert ("new_listening", "tcp/8080 on 0.0.0.0") in kinds
    assert not {k for k, _ in kinds} & {"host_added", "host_removed"}
