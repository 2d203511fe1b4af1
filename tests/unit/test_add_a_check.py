"""docs/CONTRIBUTING.md's "Add a check", followed step by step in a copy of the package: one fact
line, one check in an existing family's module, one policy line, then the generators. The new
check is run, scored and explained, and no file but those the recipe names changed (the
registry finds the check; the collectors and the fact table's consumers need no list edited).
Then the recipe's new family: one new check module that declares it, one policy line, the
generators, and nothing else edited."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO / "tests" / "snapshots" / "dedicated-4090.json"
CHECK_ID = "SYS-1990"
THRESHOLD = 3
WEIGHT = {"blocker": 3, "risk": 1, "advice": 0.5}
"""The score's rule (docs/audit.md): 100 x weight passed / weight of all but skipped findings."""

FACT_LINE = '    F("system.widgets", T.INT, "widgets on this machine, for the recipe\'s test", unit="widgets"),\n'
CHECK = f'''

@check(
    "{CHECK_ID}",
    title="Widgets on this machine",
    op=">=",
    unit="widgets",
    threshold="number",
    why="A throwaway check: the recipe's test adds it to a copy of the package.",
    fix="Add widgets.",
)
def widgets(facts: dict[str, Any], threshold: Any) -> CheckResult:
    return compare(need(facts, "system.widgets"), threshold)
'''
POLICY_LINE = (f'  - {{check: {CHECK_ID}, severity: risk, threshold: {THRESHOLD}, source: listing-cpu, '
               'note: "a throwaway requirement"}\n')
EDITED = {"hostcheck/fact_paths.py", "hostcheck/checks/machine.py", "hostcheck/policies/vast.yaml"}
GENERATED = {"docs/facts.md", "hostcheck/schema/facts-v3.json", "hostcheck/schema/report-v1.json"}


FAMILY_ID = "WID-1010"
FAMILY_TITLE = "Widget racks"
FAMILY_MODULE = f'''"""A throwaway family: the recipe's test adds it to a copy of the package."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import CheckResult, check, compare, family, need

WID = family("WID", "{FAMILY_TITLE}", order=140)


@check(
    "{FAMILY_ID}",
    title="Cores for the widget rack",
    op=">=",
    unit="cores",
    threshold="number",
    why="A throwaway check of a throwaway family.",
    fix="Add cores.",
)
def rack_cores(facts: dict[str, Any], threshold: Any) -> CheckResult:
    return compare(need(facts, "system.cpu_physical_cores"), threshold)
'''
FAMILY_POLICY_LINE = (f'  - {{check: {FAMILY_ID}, severity: risk, threshold: {THRESHOLD}, source: listing-cpu, '
                      'note: "a throwaway family\'s requirement"}\n')
FAMILY_ADDED = {"hostcheck/checks/widget_racks.py"}
FAMILY_EDITED = {"hostcheck/policies/vast.yaml"}
FAMILY_GENERATED = {"hostcheck/schema/policy-v1.json", "hostcheck/schema/report-v1.json"}
"""The check id pattern in both schemas names the new family."""


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _package_copy(root: Path) -> dict[str, str]:
    """hostcheck/ (its policies link resolved into a folder, as in the wheel), scripts/ and
    docs/facts.md, copied under ``root``; their digests."""
    shutil.copytree(REPO / "hostcheck", root / "hostcheck", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "scripts", root / "scripts")
    (root / "docs").mkdir()
    shutil.copy2(REPO / "docs" / "facts.md", root / "docs" / "facts.md")
    return _digests(root)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recipe")
    before = _package_copy(root)

    # 1. The fact: one line in the table, beside its section's other facts.
    table = root / "hostcheck" / "fact_paths.py"
    text = table.read_text()
    anchor = next(line for line in text.splitlines(keepends=True) if line.startswith('    F("system.cpu_logical_cores"'))
    table.write_text(text.replace(anchor, anchor + FACT_LINE, 1))
    # 2. The check, at the end of its family's module.
    with (root / "hostcheck" / "checks" / "machine.py").open("a") as fh:
        fh.write(CHECK)
    # 3. The policy line, at the end of the policy's requirements.
    with (root / "hostcheck" / "policies" / "vast.yaml").open("a") as fh:
        fh.write(POLICY_LINE)
    # 4. What derives from the table (scripts/regen runs these first).
    _run(root, "scripts/gen_facts_doc.py")
    _run(root, "-m", "hostcheck.schema_gen")

    changed = {path for path, digest in _digests(root).items() if before.get(path) != digest}
    assert changed == EDITED | GENERATED and set(_digests(root)) == set(before)
    return root


@pytest.fixture(scope="module")
def family_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe's new family in a copy of its own: its module, its policy line, the generators."""
    root = tmp_path_factory.mktemp("family")
    before = _package_copy(root)
    (root / "hostcheck" / "checks" / "widget_racks.py").write_text(FAMILY_MODULE)
    with (root / "hostcheck" / "policies" / "vast.yaml").open("a") as fh:
        fh.write(FAMILY_POLICY_LINE)
    _run(root, "scripts/gen_facts_doc.py")
    _run(root, "-m", "hostcheck.schema_gen")

    after = _digests(root)
    assert set(after) - set(before) == FAMILY_ADDED and set(before) <= set(after)
    changed = {path for path, digest in after.items() if path in before and before[path] != digest}
    assert changed == FAMILY_EDITED | FAMILY_GENERATED
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "100"}
    proc = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 3, 4), proc.stderr
    return proc


def _audit(root: Path, widgets: int, fact: str = "widgets") -> dict[str, Any]:
    facts = json.loads(SNAPSHOT.read_text())
    facts["system"][fact] = widgets
    snapshot = root / f"{fact}-{widgets}.json"
    snapshot.write_text(json.dumps(facts))
    proc = _run(root, "-m", "hostcheck.cli", "audit", "--facts", str(snapshot), "--policy", "vast", "--format", "json")
    (policy,) = json.loads(proc.stdout)["policies"]
    return dict(policy)


def _score(findings: list[dict[str, Any]]) -> int:
    counted = [f for f in findings if f["status"] != "skipped"]
    return round(100 * sum(WEIGHT[f["severity"]] for f in counted if f["status"] == "pass")
                 / sum(WEIGHT[f["severity"]] for f in counted))


def test_the_copy_runs_its_own_code(copy: Path) -> None:
    proc = _run(copy, "-c", "import hostcheck; print(hostcheck.__file__)")
    assert proc.stdout.strip() == str(copy / "hostcheck" / "__init__.py")


def test_the_new_check_is_run_and_scored(copy: Path) -> None:
    met, short = _audit(copy, THRESHOLD + 2), _audit(copy, THRESHOLD - 1)
    for policy, widgets, status in ((met, THRESHOLD + 2, "pass"), (short, THRESHOLD - 1, "warn")):
        (finding,) = [f for f in policy["findings"] if f["id"] == CHECK_ID]
        assert (finding["status"], finding["measured"], finding["severity"]) == (status, widgets, "risk")
        assert policy["score"] == _score(policy["findings"])
    others = [f for f in met["findings"] if f["id"] != CHECK_ID]
    assert others == [f for f in short["findings"] if f["id"] != CHECK_ID]
    assert met["score"] > short["score"]


def test_the_new_check_is_explained_with_its_policy(copy: Path) -> None:
    proc = _run(copy, "-m", "hostcheck.cli", "explain", CHECK_ID)
    assert f"{CHECK_ID}  Widgets on this machine" in proc.stdout
    assert "A throwaway check" in proc.stdout and "Add widgets." in proc.stdout
    (used,) = [line for line in proc.stdout.splitlines() if line.strip().startswith("- vast: ")]
    assert f">= {THRESHOLD} widgets" in used and "risk" in used


def test_the_copy_still_passes_the_generated_files_checks(copy: Path) -> None:
    _run(copy, "scripts/gen_facts_doc.py", "--check")
    _run(copy, "-m", "hostcheck.schema_gen", "--check")


def test_the_new_family_is_judged_under_its_title(family_copy: Path) -> None:
    met, short = _audit(family_copy, THRESHOLD + 2, "cpu_physical_cores"), _audit(family_copy, THRESHOLD - 1, "cpu_physical_cores")
    for policy, cores, status in ((met, THRESHOLD + 2, "pass"), (short, THRESHOLD - 1, "warn")):
        (finding,) = [f for f in policy["findings"] if f["id"] == FAMILY_ID]
        assert (finding["status"], finding["measured"], finding["family"]) == (status, cores, FAMILY_TITLE)
        assert policy["score"] == _score(policy["findings"])
    assert FAMILY_ID in short["risks"] and FAMILY_ID not in met["risks"]


def test_the_new_family_is_explained_under_its_title(family_copy: Path) -> None:
    proc = _run(family_copy, "-m", "hostcheck.cli", "explain", FAMILY_ID)
    assert f"{FAMILY_ID}  Cores for the widget rack  ({FAMILY_TITLE})" in proc.stdout
    (used,) = [line for line in proc.stdout.splitlines() if line.strip().startswith("- vast: ")]
    assert f">= {THRESHOLD} cores" in used and "risk" in used


def test_the_new_family_is_in_the_schemas_check_id_pattern(family_copy: Path) -> None:
    for name in ("policy-v1.json", "report-v1.json"):
        text = (family_copy / "hostcheck" / "schema" / name).read_text()
        assert "|AGT|WID)-[0-9]{4}$" in text and "|AGT)-[0-9]{4}$" not in text, name
    _run(family_copy, "scripts/gen_facts_doc.py", "--check")
    _run(family_copy, "-m", "hostcheck.schema_gen", "--check")


def test_a_new_module_is_found_by_the_registries(tmp_path: Path) -> None:
    """A new check module in checks/ and a new collector module in collectors/ are found
    without a list edited anywhere."""
    shutil.copytree(REPO / "hostcheck", tmp_path / "hostcheck", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "hostcheck" / "checks" / "widgets.py").write_text(
        "from hostcheck.checks.base import check, compare, need\n\n\n"
        '@check("SYS-1980", title="Cores", op=">=", unit="cores", threshold="number", why="w", fix="f")\n'
        "def cores(facts, threshold):\n"
        '    return compare(need(facts, "system.cpu_physical_cores"), threshold)\n')
    (tmp_path / "hostcheck" / "collectors" / "widgets.py").write_text(
        'SECTION = "system"\nTIMEOUT = 1.0\n\n\ndef collect(ctx):\n    return {}\n')
    probe = ("from hostcheck.checks import load_registry\n"
             "from hostcheck.collectors import load_collectors\n"
             "print('SYS-1980' in load_registry(), [s.section for s in load_collectors() if s.name == 'widgets'])")
    proc = _run(tmp_path, "-c", probe)
    assert proc.stdout.split("\n")[0] == "True ['system']"


def test_a_check_of_an_undeclared_family_stops_the_registry(tmp_path: Path) -> None:
    shutil.copytree(REPO / "hostcheck", tmp_path / "hostcheck", ignore=shutil.ignore_patterns("__pycache__"))
    declaration = f'WID = family("WID", "{FAMILY_TITLE}", order=140)\n'
    assert declaration in FAMILY_MODULE
    (tmp_path / "hostcheck" / "checks" / "widget_racks.py").write_text(FAMILY_MODULE.replace(declaration, ""))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", "from hostcheck.checks import load_registry; load_registry()"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert f"ValueError: check id {FAMILY_ID}: no check module declares family 'WID'" in proc.stderr
