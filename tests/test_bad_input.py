"""Malformed policies and snapshots: each maps to its exact error, exit code 2, nothing crashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostcheck.facts import FactsError, load_snapshot
from hostcheck.policy import PolicyError, parse_policy
from tests.helpers import SNAPSHOTS, hostcheck

GOOD = """\
format: 1
id: mine
title: My policy
platform: Example
kind: platform
summary: Example policy.
sources:
  doc:
    url: https://example.org/requirements
    checked: 2026-11-29
requirements:
  - check: GPU-1020
    severity: blocker
    threshold: 12
    source: doc
"""

OWNER_RISK = GOOD.replace("kind: platform", "kind: owner-risk").replace(
    "  - check: GPU-1020\n    severity: blocker\n    threshold: 12\n", "  - check: OWN-1010\n    level: high\n"
)

BAD_POLICIES = [
    ("bad YAML", GOOD.replace("kind: platform", "kind: [platform"), "line 6 column 8: invalid YAML: expected ',' or ']', but got ':'"),
    ("unknown top key", GOOD + "colour: red\n", "line 16: colour: unknown key"),
    ("unknown requirement key", GOOD + "    treshold: 3\n", "line 16: requirements[0].treshold: unknown key"),
    ("threshold of the wrong type", GOOD.replace("threshold: 12", "threshold: twelve"), "line 14: requirements[0].threshold: must be a number, not str 'twelve'"),
    ("boolean is not a number", GOOD.replace("threshold: 12", "threshold: true"), "requirements[0].threshold: must be a number, not bool True"),
    ("threshold without source", GOOD.replace("    source: doc\n", ""), "line 12: requirements[0].source: missing: every requirement cites its source"),
    ("source not declared", GOOD.replace("    source: doc\n", "    source: blog\n"), "line 15: requirements[0].source: 'blog' is not a key of 'sources'"),
    ("unknown check id", GOOD.replace("GPU-1020", "GPU-9999"), "line 12: requirements[0].check: unknown check id 'GPU-9999'"),
    ("bad severity", GOOD.replace("severity: blocker", "severity: fatal"), "line 13: requirements[0].severity: must be one of blocker, risk, advice"),
    ("threshold on a check without one", GOOD.replace("GPU-1020", "GPU-1060"), "line 14: requirements[0].threshold: this check takes no threshold"),
    ("missing threshold", GOOD.replace("    threshold: 12\n", ""), "line 12: requirements[0].threshold: missing: check GPU-1020 needs a number threshold"),
    ("bad date", GOOD.replace("checked: 2026-11-29", "checked: last week"), "line 10: sources.doc.checked: must be a date YYYY-MM-DD"),
    ("source without url", GOOD.replace("    url: https://example.org/requirements\n", ""), "sources.doc: missing required key 'url'"),
    ("missing title", GOOD.replace("title: My policy\n", ""), "policy: missing required key 'title'"),
    ("wrong format", GOOD.replace("format: 1", "format: 2"), "line 1: format: must be 1, not 2"),
    ("empty file", "", "empty policy file"),
    ("not a mapping", "- just\n- a list\n", "must be a mapping, not _Sequence"),
    ("duplicate key", GOOD.replace("kind: platform", "kind: platform\nkind: hygiene"), "line 6: duplicate key 'kind'"),
    ("duplicate check", GOOD + "  - {check: GPU-1020, severity: risk, threshold: 8, source: doc}\n", "line 16: requirements[1].check: GPU-1020 listed twice"),
    ("empty requirements", GOOD.split("requirements:")[0] + "requirements: []\n", "requirements: must be a non-empty list"),
    ("level outside owner-risk", GOOD.replace("severity: blocker", "severity: blocker\n    level: high"), "line 14: requirements[0].level: only owner-risk policies give a level"),
    ("owner-risk item with a severity", OWNER_RISK.replace("level: high", "level: high\n    severity: blocker"), "line 14: requirements[0].severity: an owner-risk item has a level"),
    ("owner-risk item without a level", OWNER_RISK.replace("    level: high\n", ""), "requirements[0]: missing required key 'level'"),
    ("owner-risk bad level", OWNER_RISK.replace("level: high", "level: severe"), "line 13: requirements[0].level: must be one of low, medium, high, not 'severe'"),
]


@pytest.mark.parametrize(("case", "text", "error"), BAD_POLICIES, ids=[c[0] for c in BAD_POLICIES])
def test_malformed_policy_is_rejected_with_line_field_and_reason(case: str, text: str, error: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "mine.yaml")
    assert str(caught.value).startswith("mine.yaml: ")
    assert error in str(caught.value)


def test_good_policy_parses() -> None:
    policy = parse_policy(GOOD, "mine.yaml")
    assert policy.requirements[0].threshold == 12
    assert policy.requirements[0].source.checked == "2026-11-29"


def test_cli_rejects_a_malformed_policy_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("threshold: 12", "threshold: twelve"))
    proc = hostcheck("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", str(bad))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"hostcheck: error: {bad}: line 14: requirements[0].threshold: must be a number" in proc.stderr


def test_cli_runs_a_user_policy_file(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(GOOD)  # needs 12 GiB VRAM: the 4090 has 24
    proc = hostcheck("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", str(mine), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["policies"][0]["verdict"] == "feasible"


def test_owner_risk_set_is_a_policy_file_with_levels_and_sources() -> None:
    from hostcheck.policy import load_owner_risk

    policy = load_owner_risk()
    assert policy.kind == "owner-risk"
    levels = {r.check: r.level for r in policy.requirements}
    assert levels["OWN-1010"] == levels["ISO-1010"] == levels["DOC-1070"] == "high"
    assert all(r.source.url.startswith("https://") for r in policy.requirements)
    mine = parse_policy(OWNER_RISK, "mine.yaml")
    assert (mine.requirements[0].level, mine.requirements[0].severity) == ("high", "risk")


def test_owner_risk_cannot_be_requested_as_a_platform_policy() -> None:
    proc = hostcheck("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--policy", "owner-risk")
    assert proc.returncode == 2
    assert "is judged in every report" in proc.stderr


def test_explain_shows_owner_risk_level_and_new_checks_with_sources() -> None:
    own = hostcheck("explain", "OWN-1010").stdout
    assert "owner-risk       high risk" in own
    gen = hostcheck("explain", "GPU-1120").stdout
    assert "ionet" in gen and "['nvidia ampere+', 'apple m1', 'apple m2', 'apple m3']" in gen
    assert "<https://docs.io.net/docs/device-onboarding>" in gen
    kvm = hostcheck("explain", "SYS-1140").stdout
    assert "tensordock" in kvm and "install.sh" in kvm


def test_unknown_policy_name_is_a_usage_error() -> None:
    proc = hostcheck("audit", "--offline", "--policy", "vastai")
    assert proc.returncode == 2
    assert "no policy named 'vastai'" in proc.stderr


BAD_SNAPSHOTS = [
    ("not JSON", "{facts", "line 1 column 2: invalid JSON: Expecting property name enclosed in double quotes"),
    ("a list", "[]", "a facts snapshot is a JSON object, not list"),
    ("no meta", '{"gpu": {}}', "missing 'meta' object (is this a hostcheck facts file?)"),
    ("future format", '{"meta": {"facts_format": 9}}', "meta.facts_format is 9; this hostcheck reads format 1"),
    ("section not an object", '{"meta": {"facts_format": 1}, "gpu": 5}', "section 'gpu' must be an object, not int"),
]


@pytest.mark.parametrize(("case", "text", "error"), BAD_SNAPSHOTS, ids=[c[0] for c in BAD_SNAPSHOTS])
def test_malformed_snapshot_is_rejected(tmp_path: Path, case: str, text: str, error: str) -> None:
    path = tmp_path / "facts.json"
    path.write_text(text)
    with pytest.raises(FactsError) as caught:
        load_snapshot(path)
    assert str(caught.value) == f"{path}: {error}"
    proc = hostcheck("audit", "--facts", str(path))
    assert proc.returncode == 2
    assert f"hostcheck: error: {path}: {error}" in proc.stderr


def test_missing_snapshot_file_is_exit_2(tmp_path: Path) -> None:
    proc = hostcheck("audit", "--facts", str(tmp_path / "nope.json"))
    assert proc.returncode == 2
    assert "cannot read: No such file or directory" in proc.stderr


def test_snapshot_with_sections_missing_is_judged_unknown_not_pass(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text('{"meta": {"facts_format": 1}}')
    proc = hostcheck("audit", "--facts", str(path), "--policy", "dedicated-host", "--format", "json")
    report = json.loads(proc.stdout)
    statuses = {f["status"] for f in report["policies"][0]["findings"]}
    assert statuses <= {"unknown", "pass"} and "unknown" in statuses
    passed = [f["id"] for f in report["policies"][0]["findings"] if f["status"] == "pass"]
    # Only checks that pass on the *absence* of a component may pass on empty facts: none here.
    assert passed == []
    assert report["policies"][0]["verdict"] == "undetermined"
    assert proc.returncode == 3


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_policy_parser_never_crashes_on_arbitrary_text(text: str) -> None:
    try:
        parse_policy(text, "fuzz.yaml")
    except PolicyError as exc:
        assert str(exc).startswith("fuzz.yaml: ")
