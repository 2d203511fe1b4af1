"""The facts table (hostcheck/fact_paths.py) holds: checks read declared facts (a misspelt path
is an error, not a quiet unknown), collectors write exactly the declared shape, every snapshot
under tests/ is at today's format, older files are upgraded without guessing, and
docs/facts.md is generated from the table."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.checks.base import CheckMeta, need
from hostcheck.collectors import CollectContext, collect_facts, gpu
from hostcheck.errors import FactsError, UndeclaredFact
from hostcheck.fact_paths import DECLARED, TABLE, is_declared
from hostcheck.fact_validation import shape_problems, type_problem
from hostcheck.facts import FACTS_FORMAT, Unknown, load_snapshot, lookup, to_jsonable
from hostcheck.judge import run_check
from hostcheck.models import Operator, Status, ThresholdKind
from hostcheck.upgrade import upgrade
from tests.helpers import REPO
from tests.nvml_standin import FakeNvml, laptop_3080ti, server_a100

CHECK_FILES = sorted((REPO / "hostcheck" / "checks").glob("*.py"))
# Facts read outside the checks: the host name (facts.py), by the report and the fleet view.
OTHER_READERS = [REPO / "hostcheck" / name for name in ("facts.py", "report.py", "fleet/reports.py", "fleet/drift.py")]
SNAPSHOTS = sorted((REPO / "tests" / "snapshots").glob("*.json"))
REGISTRY = load_registry()


def _strings(nodes: list[ast.stmt]) -> dict[str, str]:
    """Names given a string in ``nodes`` (``_KERNEL = "system.os_kernel_name"``)."""
    return {target.id: node.value.value for stmt in nodes for node in ast.walk(stmt)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def _paths_read(path: Path) -> list[tuple[str, int, str]]:
    """(path or f-string prefix + '*', line, how) for every fact path read in a module: spelled in
    the call, or through a name the module or the calling function gives it."""
    found = []

    def visit(node: ast.AST, held: dict[str, str]) -> None:
        if isinstance(node, ast.FunctionDef):
            held = {**held, **_strings(node.body)}
        for child in ast.iter_child_nodes(node):
            visit(child, held)
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            return
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        arg = node.args[1]
        if isinstance(arg, ast.Name) and arg.id in held:
            arg = ast.Constant(held[arg.id])
        if name in ("need", "lookup"):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, node.lineno, name))
            elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                found.append((f"{arg.values[0].value}*", node.lineno, name))
        elif name == "device_field" and isinstance(arg, ast.Constant):
            found.append((f"gpu.devices.*.{arg.value}", node.lineno, name))

    tree = ast.parse(path.read_text())
    visit(tree, _strings([s for s in tree.body if isinstance(s, ast.Assign)]))
    return found


def test_the_scan_sees_the_checks_reads() -> None:
    seen = {p for f in CHECK_FILES for p, _, _ in _paths_read(f)}
    # "gpu.devices" and "system.os_kernel_name" are read through a name (base.py, machine.py).
    assert {"gpu.devices", "system.os_kernel_name", "system.ram_total_mib", "docker.*",
            "gpu.devices.*.vram_total_mib"} <= seen


def test_every_fact_path_a_check_reads_is_declared() -> None:
    undeclared = []
    for module in CHECK_FILES + OTHER_READERS:
        for path, line, how in _paths_read(module):
            if path.endswith(".*"):  # an f-string: its fixed part must lead somewhere declared
                ok = any(d.startswith(path[:-1]) for d in DECLARED)
            else:
                ok = is_declared(path)
            if not ok:
                undeclared.append(f"{module.name}:{line}: {how}(..., {path!r})")
    assert not undeclared, undeclared


def test_docs_facts_md_is_what_the_table_generates() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_facts_doc.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_live_collection_writes_exactly_the_declared_shape() -> None:
    """Every key a collector writes is declared, and every declared key is written (a key
    declared with `when` only in its case); the GPU section through the NVML stand-in, which
    answers every query, since this machine has no GPU."""
    facts = to_jsonable(collect_facts(CollectContext(offline=True, budget_s=20)))
    assert shape_problems(facts) == []
    assert type_problem(facts) is None
    stood_in = to_jsonable({"gpu": gpu.nvml_facts(FakeNvml([laptop_3080ti(), server_a100("00000000:41:00.0", "GPU-a")]))
                            | {"display_adapters": []}})
    assert shape_problems(stood_in["gpu"], "gpu") == []
    assert type_problem(stood_in) is None


def test_shape_problems_name_what_is_extra_and_what_is_missing() -> None:
    facts = {"power": {"chassis_type": "laptop", "fan_rpm": 3000}, "meta": Unknown("x")}
    problems = shape_problems(to_jsonable(facts))
    assert "power.fan_rpm: not declared" in problems
    assert "power.on_ac: declared, not written" in problems
    assert "gpu: declared, not written" in problems


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda p: p.stem)
def test_every_snapshot_is_at_todays_format(snapshot: Path) -> None:
    """No snapshot under tests/ needs the upgrader: today's format, no undeclared key, every
    value of its declared type (a fact added since it was written may be absent)."""
    data = json.loads(snapshot.read_text())
    assert data["meta"]["facts_format"] == FACTS_FORMAT
    assert [p for p in shape_problems(data) if not p.endswith("declared, not written")] == []
    assert type_problem(data) is None
    assert upgrade(data) is data


FORMAT_1 = {
    "meta": {"facts_format": 1, "hostname": "old", "collected_at": "2026-01-01T00:00:00+00:00"},
    "gpu": {"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3080 Ti Laptop GPU", "is_laptop": True,
                         "laptop_evidence": "name contains 'Laptop'"}]},
    "network": {"firewall": {"backend": "nftables", "readable": True, "input_policy": "drop",
                             "forward_policy": "drop", "rule_count": 14, "docker_user_chain_filters": True},
                "container_egress": {"bridges": ["docker0"], "bridges_assumed": False, "probes": []}},
    "retired_section": {"x": 1},
}


def test_a_format_1_file_is_upgraded_without_guessing(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(FORMAT_1))
    facts = to_jsonable(load_snapshot(path))
    assert facts["meta"]["facts_format"] == FACTS_FORMAT and facts["meta"]["upgraded_from"] == 1
    assert shape_problems(facts) == []
    assert "retired_section" not in facts
    # The collector's laptop verdict goes: GPU-1060 judges name and chassis.
    assert "is_laptop" not in facts["gpu"]["devices"][0] and facts["gpu"]["devices"][0]["name"].endswith("GPU")
    # A judged summary is not the ruleset: unknown, saying what the file held and what to do.
    reason = facts["network"]["firewall"]["nftables"]["$unknown"]
    assert "input_policy drop" in reason and "hostcheck facts" in reason
    assert "probes" not in facts["network"]["container_egress"]
    assert facts["network"]["container_egress"]["bridges"] == ["docker0"]
    assert "format 1" in facts["network"]["container_egress"]["bridges_v6"]["$unknown"]
    assert "format 1" in facts["system"]["$unknown"]
    assert FORMAT_1["gpu"]["devices"][0]["is_laptop"] is True  # the input is left alone


FORMAT_2 = {
    "meta": {"facts_format": 2, "hostname": "old", "collected_at": "2026-11-01T00:00:00+00:00"},
    "isolation": {"cloud_accounts": [{"name": "ubuntu", "sudo_scope": "unrestricted",
                                      "nopasswd_rules": ["/etc/sudoers.d/90-cloud-init-users:3"]}]},
}


def test_a_format_2_file_is_upgraded_without_guessing(tmp_path: Path) -> None:
    """Format 2 kept what sudo grants each cloud account, a verdict ISO-1070 no longer reads:
    it goes, and the sudoers record it would be judged from is unknown, saying what the file
    held and what to do; the check says unknown, never the old verdict."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps(FORMAT_2))
    facts = to_jsonable(load_snapshot(path))
    assert facts["meta"]["facts_format"] == FACTS_FORMAT and facts["meta"]["upgraded_from"] == 2
    assert shape_problems(facts) == []
    account = facts["isolation"]["cloud_accounts"][0]
    assert account["name"] == "ubuntu" and "sudo_scope" not in account and "nopasswd_rules" not in account
    assert "format 2" in account["gids"]["$unknown"] and "collect again" in account["gids"]["$unknown"]
    reason = facts["isolation"]["sudoers"]["$unknown"]
    assert reason.startswith("format 2 kept only what sudo granted the cloud accounts (ubuntu: sudo unrestricted, "
                             "NOPASSWD rules /etc/sudoers.d/90-cloud-init-users:3)"), reason
    assert "collect again" in reason
    outcome = run_check(REGISTRY["ISO-1070"], load_snapshot(path), None)
    assert (outcome.status, outcome.detail) == ("unknown", f"isolation.sudoers: {reason}")
    assert FORMAT_2["isolation"]["cloud_accounts"][0]["sudo_scope"] == "unrestricted"  # the input is left alone


@pytest.mark.parametrize(("accounts", "sudoers", "status", "measured", "detail"), [
    ([], None, "pass", "no default cloud account", ""),
    ({"$unknown": "permission denied reading /etc/sudoers (needs root): sudo rules are readable only by root; run "
                  "`sudo hostcheck audit`"}, {"$unknown": "not recorded in format 2; collect again"}, "unknown", None,
     "isolation.cloud_accounts: permission denied reading /etc/sudoers (needs root): sudo rules are readable only "
     "by root; run `sudo hostcheck audit`"),
])
def test_a_format_2_file_without_a_verdict_to_drop_is_judged_as_before(
        tmp_path: Path, accounts: Any, sudoers: Any, status: str, measured: Any, detail: str) -> None:
    """No cloud account, or none readable: nothing was judged, and ISO-1070 says what it said."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**FORMAT_2, "isolation": {"cloud_accounts": accounts}}))
    facts = to_jsonable(load_snapshot(path))
    assert shape_problems(facts) == []
    recorded = facts["isolation"]["sudoers"]
    if sudoers is None:
        assert recorded is None  # no cloud account: sudoers was not read, as today
    else:
        assert recorded["$unknown"].startswith(sudoers["$unknown"]), recorded
    outcome = run_check(REGISTRY["ISO-1070"], load_snapshot(path), None)
    assert (outcome.status, outcome.measured, outcome.detail) == (status, measured, detail)


def test_the_upgrade_command_redacts_when_asked(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps(FORMAT_1))
    proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", "facts", "--upgrade", str(old), "--redact"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["meta"]["hostname"] != "old"


def test_the_upgrade_command_writes_the_upgraded_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(FORMAT_1))
    proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", "facts", "--upgrade", str(old), "-o", str(new)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(new.read_text()) == to_jsonable(load_snapshot(old))
    assert json.loads(old.read_text()) == FORMAT_1


@pytest.mark.parametrize(("fmt", "says"), [
    (FACTS_FORMAT + 1, "newer hostcheck"), (0, "reads formats 1 to"), (True, "a boolean"), ("2", "'2'")])
def test_formats_it_cannot_read_are_refused_with_the_reason(tmp_path: Path, fmt: Any, says: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"meta": {"facts_format": fmt}}))
    with pytest.raises(FactsError, match=says):
        load_snapshot(path)


@pytest.mark.parametrize(("path", "value", "says"), [
    ("system.secure_boot", "false", "must be true or false"),
    ("system.ram_total_mib", 1.5, "must be a whole number"),
    ("system.ram_total_mib", 2**63, "must be a whole number"),
    ("system.uptime_s", "12", "must be a number"),
    ("system.os_id", 12, "must be text"),
    ("system.desktop_sessions", ["gnome", 3], "must be a list of text"),
    ("storage.filesystems", {"a": 1}, "must be a list"),
    ("meta.collected_at", "2026-02-30T00:00:00+00:00", "must be a time"),
    ("meta.collected_at", "2026-11-29T12:00:00", "must be a time"),
    ("system.ram_total_mib", -1, "must not be negative"),
])
def test_a_fact_of_the_wrong_type_is_refused_naming_the_field(tmp_path: Path, path: str, value: Any, says: str) -> None:
    data = json.loads((REPO / "tests" / "snapshots" / "reference-laptop.json").read_text())
    section, key = path.split(".")
    data[section][key] = value
    file = tmp_path / "f.json"
    file.write_text(json.dumps(data))
    with pytest.raises(FactsError, match=f"{path}: {says}"):
        load_snapshot(file)


def test_every_fact_has_a_meaning_and_a_known_redaction_kind() -> None:
    kinds = {"host", "addr", "user", "users", "path", "mac", "iface", "serial", "uuid", "container", "uri", "sshd",
             "text"}
    for path, fact in TABLE.items():
        assert fact.meaning.strip(), path
        assert not fact.redact or fact.redact in kinds, path


def test_lookup_refuses_an_undeclared_path_but_not_an_uncollected_one() -> None:
    with pytest.raises(UndeclaredFact, match="gpu.devcies"):
        lookup({"gpu": {}}, "gpu.devcies")
    assert not lookup({"gpu": {}}, "gpu.devices")  # declared, not collected: Unknown
    assert lookup({"gpu": {"devices": [{"name": "x"}]}}, "gpu.devices.0.name") == "x"
    assert lookup({"ssh": {"settings": {"port": "22"}}}, "ssh.settings.port") == "22"


def test_a_check_reading_an_undeclared_path_is_an_error_finding() -> None:
    def typo(facts: dict[str, Any], _threshold: Any) -> Any:
        return need(facts, "system.ram_totl_mib")

    meta = CheckMeta("SYS-9990", "typo", Operator.GE, "", ThresholdKind.NONE, "why", "fix", "", typo)
    outcome = run_check(meta, {"system": {"ram_total_mib": 1024}}, None)
    assert outcome.status == Status.ERROR
    assert "system.ram_totl_mib" in outcome.detail and "not declared" in outcome.detail
