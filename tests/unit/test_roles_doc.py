"""docs/roles.md's variable tables are generated from each role's meta/argument_specs.yml
(scripts/gen_roles_doc.py); a spec changed without regenerating fails here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_roles_doc.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_roles_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_roles_md_is_what_the_script_generates() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, (
        f"{proc.stderr}docs/roles.md is out of date; regenerate it with: .venv/bin/python scripts/gen_roles_doc.py")


def test_a_stale_table_is_regenerated_and_the_prose_kept() -> None:
    gen = load_script()
    doc = (ROOT / "docs" / "roles.md").read_text()
    stale = doc.replace("| `host_baseline_enabled` | bool | `true` |", "| `host_baseline_enabled` | bool | `false` |")
    assert stale != doc, "the table row this test edits is gone; pick another"
    stale = stale.replace("## Read this first", "## Read this first (hand-written)")
    fixed = gen.render(stale, ROOT)
    assert "| `host_baseline_enabled` | bool | `true` |" in fixed
    assert "## Read this first (hand-written)" in fixed, "text outside the markers is left alone"
    assert fixed == doc.replace("## Read this first", "## Read this first (hand-written)")


def test_every_role_variable_has_a_row() -> None:
    gen = load_script()
    tables = gen.generated(ROOT)
    for role in gen.role_order(ROOT):
        for name in gen.main_spec(ROOT, role).get("options") or {}:
            assert f"| `{name}` |" in tables, name
    assert "### provider_common" not in tables, "an internal role with no operator-set variables"
