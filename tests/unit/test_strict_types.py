"""Input files hold values of the type they claim: a date is a real date, an integer is bounded,
a boolean is not a number. Each wrong value is exit 2 with file, line and field, never an
"internal error" (exit 1); mutated policies, snapshots and fleet reports never crash the CLI."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hostcheck.cli import app
from hostcheck.errors import FactsError, PolicyError
from hostcheck.facts import FACTS_FORMAT, load_snapshot
from hostcheck.policy import MAX_NUMBER, parse_policy
from tests.helpers import SNAPSHOTS, run_cli
from tests.unit.test_bad_input import GOOD

SNAP = SNAPSHOTS / "dedicated-4090.json"
BIG = "9" * 5000

BAD_VALUES = [
    # (case, replaced, by, line, field, reason)
    ("month 13", "checked: 2026-11-29", "checked: 2026-13-45", 10, "sources.doc.checked",
     "'2026-13-45' is not a real date (month must be in 1..12)"),
    ("30 February", "checked: 2026-11-29", "checked: 2026-02-30", 10, "sources.doc.checked",
     "'2026-02-30' is not a real date (day is out of range for month)"),
    ("30 February, quoted", "checked: 2026-11-29", "checked: '2026-02-30'", 10, "sources.doc.checked",
     "must be a date YYYY-MM-DD, not '2026-02-30'"),
    ("a time is not a date", "checked: 2026-11-29", "checked: 2026-11-29 10:00:00", 10, "sources.doc.checked",
     "must be a date YYYY-MM-DD"),
    ("5000-digit threshold", "threshold: 12", f"threshold: {BIG}", 17, "requirements[0].threshold",
     f"the integer '{'9' * 40}... (5000 characters)' is out of range (at most {MAX_NUMBER} in magnitude)"),
    ("30-digit threshold", "threshold: 12", "threshold: " + "9" * 30, 17, "requirements[0].threshold",
     "is out of range"),
    ("negative 5000 digits", "threshold: 12", f"threshold: -{BIG}", 17, "requirements[0].threshold", "is out of range"),
    ("NaN threshold", "threshold: 12", "threshold: .nan", 17, "requirements[0].threshold",
     f"must be a finite number of at most {MAX_NUMBER} in magnitude, not nan"),
    ("infinite threshold", "threshold: 12", "threshold: -.inf", 17, "requirements[0].threshold", "must be a finite number"),
    ("huge float threshold", "threshold: 12", "threshold: 1.0e+300", 17, "requirements[0].threshold", "must be a finite number"),
    ("boolean threshold", "threshold: 12", "threshold: yes", 17, "requirements[0].threshold",
     "must be a number, not bool True"),
    ("format true", "format: 1", "format: true", 1, "format",
     "must be 1, not the boolean True (a boolean is not a number)"),
    ("format 1.0", "format: 1", "format: 1.0", 1, "format", "must be 1, not 1.0"),
    ("format '1'", "format: 1", "format: '1'", 1, "format", "must be 1, not '1'"),
    ("a date where text goes", "title: My policy", "title: 2026-02-30", 3, "title", "is not a real date"),
    ("5000 digits where text goes", "title: My policy", f"title: {BIG}", 3, "title", "is out of range"),
]


@pytest.mark.parametrize(("case", "old", "new", "line", "field", "reason"), BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_policy_values_of_the_wrong_type_name_file_line_and_field(
    tmp_path: Path, case: str, old: str, new: str, line: int, field: str, reason: str
) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new)
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "mine.yaml")
    message = str(caught.value)
    assert message.startswith(f"mine.yaml: line {line}: {field}: "), message
    assert reason in message, message
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    proc = run_cli("audit", "--facts", str(SNAP), "--policy", str(path))
    assert proc.returncode == 2, proc.stderr
    assert f"hostcheck: error: {path}: line {line}: {field}: " in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_list_threshold_items_are_strings() -> None:
    text = GOOD.replace("GPU-1020", "SYS-1050").replace("threshold: 12", "threshold: [ubuntu 22.04, true]")
    with pytest.raises(PolicyError, match=r"line 17: requirements\[0\].threshold: must be a list of non-empty strings, "
                                          r"not one holding bool True"):
        parse_policy(text, "mine.yaml")


def test_largest_allowed_threshold_still_parses() -> None:
    policy = parse_policy(GOOD.replace("threshold: 12", f"threshold: {MAX_NUMBER}"), "mine.yaml")
    assert policy.requirements[0].threshold == MAX_NUMBER


def _snapshot(**meta: Any) -> dict[str, Any]:
    data = json.loads(SNAP.read_text())
    data["meta"].update(meta)
    return data


@pytest.mark.parametrize(("value", "shown"), [(True, "True (a boolean, not a number)"), (1.0, "1.0"), ("1", "'1'")])
def test_snapshot_format_must_be_an_integer(tmp_path: Path, value: Any, shown: str) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(_snapshot(facts_format=value)))
    with pytest.raises(FactsError) as caught:
        load_snapshot(path)
    assert str(caught.value) == f"{path}: meta.facts_format is {shown}; this hostcheck reads formats 1 to {FACTS_FORMAT}"
    proc = run_cli("audit", "--facts", str(path))
    assert proc.returncode == 2 and "meta.facts_format is" in proc.stderr


BAD_BOOLEANS = [
    ("system", "secure_boot", "false", "system.secure_boot: must be true or false, not str 'false'"),
    ("ssh", "installed", 0, "ssh.installed: must be true or false, not int 0"),
    ("isolation", "apparmor_enabled", "yes", "isolation.apparmor_enabled: must be true or false, not str 'yes'"),
]


@pytest.mark.parametrize(("section", "key", "value", "error"), BAD_BOOLEANS, ids=[c[3].split(":")[0] for c in BAD_BOOLEANS])
def test_snapshot_booleans_must_be_booleans(tmp_path: Path, section: str, key: str, value: Any, error: str) -> None:
    """'false' is truthy: read as a boolean it would say the opposite of what the file meant."""
    data = _snapshot()
    data[section][key] = value
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FactsError) as caught:
        load_snapshot(path)
    assert str(caught.value) == f"{path}: {error}"


def test_a_boolean_inside_a_list_is_checked_too(tmp_path: Path) -> None:
    data = _snapshot()
    data["gpu"]["devices"][0]["persistence_mode"] = "Enabled"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data))
    proc = run_cli("audit", "--facts", str(path))
    assert proc.returncode == 2
    assert "gpu.devices.0.persistence_mode: must be true or false, not str 'Enabled'" in proc.stderr


def test_unknown_and_null_booleans_are_accepted(tmp_path: Path) -> None:
    data = _snapshot()
    data["system"]["secure_boot"] = {"$unknown": "mokutil not installed"}
    data["docker"]["icc"] = None
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data))
    assert load_snapshot(path)["system"]["secure_boot"].reason == "mokutil not installed"


def _report() -> dict[str, Any]:
    proc = run_cli("audit", "--facts", str(SNAP), "-f", "json")
    return dict(json.loads(proc.stdout))


@pytest.mark.parametrize("value", [True, 1.0])
def test_fleet_report_version_must_be_the_integer_1(tmp_path: Path, value: Any) -> None:
    report = _report()
    report["report_version"] = value
    (tmp_path / "host-a.json").write_text(json.dumps(report))
    proc = run_cli("fleet", str(tmp_path))
    assert proc.returncode == 2
    assert f"host-a.json: report_version must be an integer, not {type(value).__name__} {value!r}" in proc.stderr


# ------------------------------------------------------------ mutated files never crash

def _invoke(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    # The runner catches what main() would turn into "internal error" (exit 1).
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2, 3, 4), (result.exit_code, result.output)
    assert "Traceback" not in result.output and "internal error" not in result.output


YAML_SCALARS = st.sampled_from([
    "2026-13-45", "2026-02-30", "'2026-02-30'", "2026-11-29 25:61:00", BIG, "-" + BIG, "9" * 30, "1.0e+400",
    ".nan", "-.inf", "true", "no", "~", "''", "1.0", "'1'", "0x" + "f" * 40, "0o777", "1_000", "!!binary aGk=",
    "!!binary %%%", "!!float x", "!!int x", "!!timestamp 2026-99-99", "[]", "{}", "[1, [2]]", "{a: 1}", "\"\\x00\"",
    "!!python/object:os.system x", "&a 1", "*a", "0", "-1", "12", "ubuntu 22.04",
])


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_mutated_policies_exit_cleanly(data: st.DataObject) -> None:
    lines = GOOD.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        key, sep, _ = lines[index].partition(":")
        lines[index] = f"{key}{sep or ':'} {data.draw(YAML_SCALARS)}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutated.yaml"
        path.write_text("\n".join(lines) + "\n")
        _invoke(["audit", "--facts", str(SNAP), "--policy", str(path), "-f", "json"])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20) | st.sampled_from(["2026-02-30", "yes", "no", "1", "true", "", "-1", "1e999"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


SNAPSHOT_FILES = sorted(SNAPSHOTS.glob("*.json"))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_mutated_snapshots_and_reports_exit_cleanly(data: st.DataObject) -> None:
    source = data.draw(st.sampled_from(SNAPSHOT_FILES))
    facts = json.loads(source.read_text())
    paths = _paths(facts)
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(paths))
        parent = facts
        try:
            for part in path[:-1]:
                parent = parent[part]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = data.draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "facts.json"
        snapshot.write_text(json.dumps(facts))
        _invoke(["audit", "--facts", str(snapshot), "-f", data.draw(st.sampled_from(["json", "table", "markdown"]))])
        if data.draw(st.booleans()):
            # The same damage inside a full report, read back by the fleet view.
            report = _report_template()
            report["facts"] = facts
            (Path(tmp) / "fleet").mkdir()
            (Path(tmp) / "fleet" / "host.json").write_text(json.dumps(report))
            _invoke(["fleet", str(Path(tmp) / "fleet")])


_TEMPLATE: dict[str, Any] = {}


def _report_template() -> dict[str, Any]:
    if not _TEMPLATE:
        _TEMPLATE.update(_report())
    return json.loads(json.dumps(_TEMPLATE))
