"""Checks read declared facts: a misspelt path is an error, not a quiet unknown, and every
declared path is documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks.base import CheckMeta, need
from hostcheck.fact_paths import DECLARED, UndeclaredFact, is_declared
from hostcheck.facts import lookup
from hostcheck.judge import run_check
from hostcheck.models import Operator, Status, ThresholdKind
from tests.helpers import REPO

CHECK_FILES = sorted((REPO / "hostcheck" / "checks").glob("*.py"))
# Facts read outside the checks, by the report and the fleet view.
OTHER_READERS = [REPO / "hostcheck" / "report.py", REPO / "hostcheck" / "fleet.py"]
FACTS_DOC = (REPO / "docs" / "facts.md").read_text()


def _paths_read(path: Path) -> list[tuple[str, int, str]]:
    """(path or f-string prefix + '*', line, how) for every fact path literal read in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        arg = node.args[1]
        if name in ("need", "lookup"):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, node.lineno, name))
            elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                found.append((f"{arg.values[0].value}*", node.lineno, name))
        elif name == "device_field" and isinstance(arg, ast.Constant):
            found.append((f"gpu.devices.*.{arg.value}", node.lineno, name))
    return found


def test_the_scan_sees_the_checks_reads() -> None:
    seen = {p for f in CHECK_FILES for p, _, _ in _paths_read(f)}
    assert {"gpu.devices", "system.ram_total_mib", "docker.*", "gpu.devices.*.vram_total_mib"} <= seen


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


def _section(name: str) -> str:
    match = re.search(rf"^## {re.escape(name)} .*?(?=^## |\Z)", FACTS_DOC, re.S | re.M)
    assert match, f"docs/facts.md has no '## {name}' section"
    return match.group(0)


@pytest.mark.parametrize("path", sorted(DECLARED))
def test_every_declared_path_is_documented(path: str) -> None:
    section, *keys = path.split(".")
    text = _section(section)
    missing = [key for key in keys if key != "*" and f"`{key}`" not in text]
    assert not missing, f"docs/facts.md section '{section}' does not name {missing} (declared: {path})"


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
