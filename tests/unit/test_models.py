"""The models are the one source: the shipped schemas are generated from them, the policies
and reports match them, and no module keeps its own copy of their words."""

from __future__ import annotations

import ast
import json
import os
from enum import StrEnum
from pathlib import Path

import jsonschema
import pytest
import yaml

from hostcheck import models, schema_gen
from hostcheck.checks import family_prefixes
from hostcheck.errors import PolicyError
from hostcheck.facts import load_snapshot
from hostcheck.models import Report
from hostcheck.policy import parse_policy, resolve_policies
from hostcheck.report import build_report
from tests.helpers import REPO, SNAPSHOTS, run_cli
from tests.unit.test_bad_input import GOOD

SCHEMAS = REPO / "hostcheck" / "schema"
GOLDEN = REPO / "tests" / "golden"
REGENERATE_GOLDEN = "HOSTCHECK_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_models.py -k golden"


def test_shipped_schemas_are_what_the_models_generate() -> None:
    stale = schema_gen.stale()
    assert not stale, f"{', '.join(stale)} differ from the models: regenerate with `{schema_gen.REGENERATE}`"


@pytest.mark.parametrize("name", ["report-v1.json", "policy-v1.json"])
def test_shipped_schemas_are_valid_draft_2020_12(name: str) -> None:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"].endswith(name)


def _policy_json(path: Path) -> object:
    # YAML reads an unquoted date as a date; in JSON it is the ISO string the schema asks for.
    return json.loads(json.dumps(yaml.safe_load(path.read_text()), default=str))


@pytest.mark.parametrize("path", sorted((REPO / "hostcheck" / "policies").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_policies_match_the_policy_schema(path: Path) -> None:
    jsonschema.validate(_policy_json(path), json.loads((SCHEMAS / "policy-v1.json").read_text()))


def test_policy_schema_and_loader_refuse_the_same_unknown_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD + "colour: red\n")
    with pytest.raises(jsonschema.ValidationError, match="colour"):
        jsonschema.validate(_policy_json(bad), json.loads((SCHEMAS / "policy-v1.json").read_text()))
    with pytest.raises(PolicyError, match="line 19: colour: unknown key"):
        parse_policy(bad.read_text(), "bad.yaml")


def test_every_problem_of_a_policy_is_reported_with_its_line() -> None:
    text = GOOD.replace("kind: platform", "kind: platfrom").replace("severity: blocker", "severity: fatal")
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "mine.yaml")
    assert str(caught.value).splitlines() == [
        "mine.yaml: line 5: kind: must be one of platform, hygiene, owner-risk, not 'platfrom'",
        "mine.yaml: line 16: requirements[0].severity: must be one of blocker, risk, advice, not 'fatal'",
    ]


def test_a_written_report_reads_back_as_the_same_model() -> None:
    report = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), resolve_policies([]))
    written = report.as_dict()
    again = Report.from_json(json.dumps(written), family_prefixes())
    assert again == report
    assert json.dumps(again.as_dict(), indent=2) == json.dumps(written, indent=2)
    assert list(written) == [name for name in Report.model_fields if name != "redacted"]


def test_golden_report_is_byte_for_byte_unchanged() -> None:
    """The JSON a user gets for a recorded machine: any change to it must be deliberate."""
    golden = GOLDEN / "dedicated-4090.json"
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", "vast",
                   "--policy", "salad-linux", "--format", "json")
    assert proc.stdout, proc.stderr
    lines = proc.stdout.splitlines(keepends=True)
    text = "".join('  "generated_at": "GENERATED_AT",\n' if '"generated_at"' in line else line for line in lines)
    if os.environ.get("HOSTCHECK_REGENERATE_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text(), f"the report changed; if that is meant, regenerate with `{REGENERATE_GOLDEN}`"


# Modules that read or write the vocabulary; each must take it from hostcheck.models.
VOCABULARY_USERS = [
    *sorted((REPO / "hostcheck").glob("*.py")),
    *sorted((REPO / "hostcheck" / "render").glob("*.py")),
    *sorted((REPO / "hostcheck" / "knowledge").rglob("*.py")),
    *sorted((REPO / "hostcheck" / "fleet").glob("*.py")),
    *sorted((REPO / "hostcheck" / "commands").glob("*.py")),
    REPO / "hostcheck" / "checks" / "base.py",
]
PLAIN_ANSWERS = {"yes", "no"}
ENUMS = [value for value in vars(models).values() if isinstance(value, type) and issubclass(value, StrEnum)
         and value is not StrEnum]


@pytest.mark.parametrize("path", [p for p in VOCABULARY_USERS if p.name != "models.py"], ids=lambda p: p.name)
def test_no_module_spells_out_a_list_of_the_models_words(path: Path) -> None:
    copies = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        words = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
        for enum in ENUMS:
            shared = words & {member.value for member in enum}
            # "yes" and "no" alone are any yes/no answer (base.STATE_WORDS), not NatVerdict's list.
            if len(shared) >= 2 and not shared <= PLAIN_ANSWERS:
                copies.append(f"line {node.lineno}: {sorted(shared)} copies {enum.__name__}")
    assert not copies, copies
