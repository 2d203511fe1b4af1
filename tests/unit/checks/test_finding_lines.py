"""Every finding's first line reads true as a sentence, whatever was measured.

The bug this guards against: "SSH password login off: yes" for `PasswordAuthentication yes`.
A title states the requirement; the value after it must name what it is the value of, or a
bare "yes", "off" or "enabled" reads as the title's answer, which is the opposite of the truth
whenever the requirement is not met. The rule is written out here, independently of the code:
the measured part of a pass/fail/warn line is never a bare state word (optionally "on GPU N").
It is applied to every check over every snapshot, and again with every boolean fact and every
sshd setting of the snapshots flipped, so the failing values (absent from most snapshots) are
rendered too.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hostcheck.facts import load_snapshot
from hostcheck.models import Finding, OwnerRiskFinding, Report
from hostcheck.policy import load_shipped, shipped_policy_names
from hostcheck.render.text import finding_line, measured_text, risk_row_text
from hostcheck.report import build_report
from tests.helpers import SNAPSHOTS, run_cli

BARE_STATES = {
    "yes", "no", "on", "off", "true", "false", "enabled", "disabled", "none", "present", "absent",
    "encrypted", "unencrypted", "set", "unset",
}
BARE = re.compile(r"^(?P<word>\S+)( on GPU [0-9, ]+)?$")
JUDGED = {"pass", "fail", "warn"}
SNAPSHOT_FILES = sorted(SNAPSHOTS.glob("*.json"))


def reads_as_answer(shown: str) -> bool:
    match = BARE.match(shown.strip())
    return bool(match) and match.group("word").lower() in BARE_STATES


@cache
def policies() -> list[Any]:
    return [load_shipped(name) for name in shipped_policy_names() if name != "owner-risk"]


def report_of(facts: dict[str, Any]) -> Report:
    return build_report(facts, policies())


def lines_of(report: Report) -> list[tuple[Finding | OwnerRiskFinding, str, str]]:
    """(finding, its measured text, its first line) for every judged finding and owner-risk row."""
    out: list[tuple[Finding | OwnerRiskFinding, str, str]] = []
    for policy in report.policies:
        for finding in policy.findings:
            shown = measured_text(finding.id, finding.measured, finding.unit)
            if finding.status in JUDGED and shown:
                out.append((finding, shown, line_of(finding)))
    for row in report.owner_risk.findings:
        if row.measured not in (None, "") and not isinstance(row.measured, dict):
            out.append((row, measured_text(row.id, row.measured), risk_row_text(row)))
    return out


def line_of(finding: Finding) -> str:
    return f"{finding.id} {finding_line(finding.id, finding.status, finding.measured, None, finding.detail)}"


def assert_lines_read_true(report: Report, where: str) -> int:
    checked = 0
    for finding, shown, line in lines_of(report):
        assert not reads_as_answer(shown), f"{where}: {line!r} reads as the answer to its title"
        assert str(finding.measured) in shown, f"{where}: {line!r} does not show the value as measured"
        checked += 1
    return checked


@pytest.mark.parametrize("snapshot", SNAPSHOT_FILES, ids=[p.stem for p in SNAPSHOT_FILES])
def test_every_first_line_names_what_it_measured(snapshot: Path) -> None:
    assert assert_lines_read_true(report_of(load_snapshot(snapshot)), snapshot.stem) > 0


def _flips(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every boolean leaf flipped, every sshd setting given the other answer."""
    found: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(node, bool):
        found.append((path, not node))
    elif isinstance(node, dict):
        for key, value in node.items():
            found += _flips(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _flips(value, (*path, index))
    elif path[:2] == ("ssh", "settings") and isinstance(node, str):
        found.append((path, "no" if node == "yes" else "yes"))
    return found


def test_every_registered_check_reads_true_on_every_snapshot_and_flip() -> None:
    """Checks no shipped policy uses (a user's policy may) are held to the same rule: each one
    without a threshold is run directly on every snapshot, and on the flips of one of them."""
    from hostcheck.checks import load_registry
    from hostcheck.judge import run_check
    from hostcheck.models import ThresholdKind

    metas = [m for m in load_registry().values() if m.threshold_kind == ThresholdKind.NONE]
    facts_list = [load_snapshot(p) for p in SNAPSHOT_FILES]
    base = load_snapshot(SNAPSHOTS / "dedicated-4090.json")
    for path, value in _flips(base):
        mutated = copy.deepcopy(base)
        parent = mutated
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = value
        facts_list.append(mutated)
    judged = 0
    for facts in facts_list:
        for meta in metas:
            outcome = run_check(meta, facts, None)
            if str(outcome.status) not in JUDGED or outcome.measured in (None, "") or isinstance(outcome.measured, dict):
                continue
            shown = measured_text(meta.id, outcome.measured, meta.unit)
            assert not reads_as_answer(shown), f"{meta.id} {meta.title}: {shown!r} reads as the answer to its title"
            judged += 1
    assert judged > 100


FLIPPED = ["dedicated-4090.json", "reference-laptop.json"]  # a server with Docker and sshd; a personal laptop


@pytest.mark.parametrize("name", FLIPPED)
def test_first_lines_read_true_with_every_boolean_fact_flipped(name: str) -> None:
    facts = load_snapshot(SNAPSHOTS / name)
    flips = _flips(facts)
    assert len(flips) > 10
    for path, value in flips:
        mutated = copy.deepcopy(facts)
        parent = mutated
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = value
        assert_lines_read_true(report_of(mutated), f"{name} with {'.'.join(map(str, path))} = {value!r}")


SSHD = {"passwordauthentication": "yes", "permitrootlogin": "yes", "permitemptypasswords": "yes",
        "kbdinteractiveauthentication": "yes"}


def test_the_issue_case_names_password_authentication_yes(tmp_path: Path) -> None:
    data = json.loads((SNAPSHOTS / "dedicated-4090.json").read_text())
    data["ssh"]["settings"].update(SSHD)
    data["docker"].update({"icc": True, "userland_proxy": True, "no_new_privileges": False})
    path = tmp_path / "open-sshd.json"
    path.write_text(json.dumps(data))
    table = run_cli("audit", "--facts", str(path), "-p", "dedicated-host", "-f", "table", "--details").stdout
    markdown = run_cli("audit", "--facts", str(path), "-p", "dedicated-host", "-f", "markdown", "--details").stdout
    table = " ".join(table.split())  # the terminal's lines are wrapped
    markdown = " ".join(markdown.split())
    for expected in ("SSH-1010 SSH password login must be off — found PasswordAuthentication yes",
                     "SSH-1020 root must not log in over SSH with a password — found PermitRootLogin yes",
                     "SSH-1030 SSH must refuse empty passwords — found PermitEmptyPasswords yes",
                     "SSH-1040 SSH keyboard-interactive login must be off — found KbdInteractiveAuthentication yes",
                     "DOC-1040 traffic between containers must be off (icc off) — found icc on",
                     "DOC-1050 Docker's userland proxy must be off — found userland-proxy on",
                     "DOC-1020 containers must not gain privileges (no-new-privileges on) — found no-new-privileges off"):
        assert expected in table, expected
        check_id, line = expected.split(" ", 1)
        assert f"| {check_id} | {line}" in markdown, expected
    assert "login off: yes" not in table and "| yes |" not in markdown
    report = json.loads(run_cli("audit", "--facts", str(path), "-p", "dedicated-host", "-f", "json").stdout)
    ssh = next(f for f in report["policies"][0]["findings"] if f["id"] == "SSH-1010")
    assert (ssh["status"], ssh["measured"]) == ("fail", "yes")  # the JSON keeps the raw value


def test_a_phrase_is_left_as_it_is() -> None:
    """'no sshd installed' is a statement already; naming the setting in front would garble it."""
    report = report_of(load_snapshot(SNAPSHOTS / "dedicated-4090.json"))
    ssh = next(f for policy in report.policies for f in policy.findings if f.id == "SSH-1010")
    line = line_of(ssh.model_copy(update={"measured": "no sshd installed", "threshold": None}))
    assert line.startswith("SSH-1010 SSH password login must be off — found no sshd installed")


MODAL = re.compile(r"\b(must|required|needs?)\b")


def test_no_check_line_can_read_as_a_pass_when_it_fails() -> None:
    """Every check's line is phrased once, in the registry: the requirement (a sentence with
    "must"/"required"/"needs", true whatever was measured), then "— found" and the measured
    value, or "— not judged" and why. So a failing line never states the title as a fact."""
    from hostcheck.checks import load_registry

    for meta in load_registry().values():
        failing = meta.line("yes", None, "evidence")
        requirement, found = failing.split(" — found ", 1)
        assert MODAL.search(requirement), f"{meta.id}: {requirement!r} does not read as a requirement"
        assert not requirement.lower().startswith(("found", "ok")), meta.id
        assert found.endswith("(evidence)"), f"{meta.id}: {failing!r} hides what was found"
        assert meta.line(None, None, "why not", judged=False).endswith("— not judged: why not"), meta.id
