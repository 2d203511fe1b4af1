"""Unknown stays unknown (a missing fact is never read as a value), and errors read one per line.

The first rule, written out: removing a fact a check reads either leaves its outcome as it was
(the check did not need it) or makes it unknown (or an error) — never a pass, a fail or a skip;
for the recorded reliability checks (REL-*), removing any field of the recording's summary
makes the outcome unknown. The second: each policy error on its own line, naming file and line;
a bad --output target is refused before anything is computed or printed.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.facts import Unknown, load_snapshot
from hostcheck.judge import run_check
from hostcheck.models import UNDECIDED, Status
from hostcheck.policy import load_shipped, shipped_policy_names
from tests.helpers import SNAPSHOTS, run_cli


@cache
def thresholds() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in shipped_policy_names():
        for req in load_shipped(name).requirements:
            out.setdefault(req.check, req.threshold)
    return out


def _paths(node: Any, prefix: tuple[str, ...] = (), depth: int = 3) -> list[tuple[str, ...]]:
    found = []
    if isinstance(node, dict) and depth:
        for key, value in node.items():
            found.append((*prefix, key))
            found += _paths(value, (*prefix, key), depth - 1)
    return found


def _without(facts: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    changed = copy.deepcopy(facts)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = Unknown("removed by the test")
    return changed


@pytest.mark.parametrize("name", ["dedicated-4090", "reference-laptop", "rtx3090-vram-in-use", "gpu-less-live"])
def test_a_removed_fact_makes_a_check_unknown_never_a_verdict(name: str) -> None:
    registry = load_registry()
    facts = load_snapshot(SNAPSHOTS / f"{name}.json")
    before = {cid: run_check(registry[cid], facts, t).status for cid, t in thresholds().items()}
    for path in _paths({k: v for k, v in facts.items() if k != "meta"}):
        changed = _without(facts, path)
        for cid, threshold in thresholds().items():
            after = run_check(registry[cid], changed, threshold).status
            if after != before[cid]:
                assert after in UNDECIDED, f"{cid} is {after} once {'.'.join(path)} is removed (was {before[cid]})"


WATCH = {"present": True, "window_start": "2026-11-20T00:00:00+00:00", "window_end": "2026-11-29T00:00:00+00:00",
         "observed_days": 9.0, "uptime_pct": 99.5,
         "segments": [{"state": "up", "start": 1795132800.0, "end": 1795906512.0},
                      {"state": "network", "start": 1795906512.0, "end": 1795910400.0}],
         "current_up_h": 30.0, "longest_up_h": 100.0, "unclean_stops": 1, "gpu_faults": []}


@pytest.mark.parametrize("field", ["observed_days", "current_up_h", "unclean_stops", "gpu_faults"])
def test_reliability_checks_read_a_missing_recording_field_as_unknown(field: str) -> None:
    registry = load_registry()
    facts = load_snapshot(SNAPSHOTS / "dedicated-4090.json")
    facts["watch"] = dict(WATCH)
    readers = {"observed_days": ["REL-1010", "REL-1030", "REL-1040", "REL-1050"], "current_up_h": ["REL-1030"],
               "unclean_stops": ["REL-1040"], "gpu_faults": ["REL-1050"]}[field]
    for cid in readers:
        assert run_check(registry[cid], facts, 5).status not in UNDECIDED, cid  # judged with the field there
        del facts["watch"][field]
        assert run_check(registry[cid], facts, 5).status == Status.UNKNOWN, f"{cid} without watch.{field}"
        facts["watch"] = dict(WATCH)


def test_each_policy_error_is_its_own_line_with_file_and_line(tmp_path: Path) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text("format: 1\nid: x\nkind: nope\n")
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "-p", str(policy))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().split("\n")
    assert len(lines) >= 3 and "\\n" not in proc.stderr
    for line in lines:
        assert line.startswith(f"hostcheck: error: {policy}: line "), line
    assert any("line 3: kind:" in line for line in lines)


@pytest.mark.parametrize("command", [["audit"], ["offer", "--no-disk-bw"], ["facts", "--upgrade"]])
def test_a_bad_output_target_is_refused_before_anything_is_computed(command: list[str], tmp_path: Path) -> None:
    snapshot = str(SNAPSHOTS / "dedicated-4090.json")
    args = [*command, snapshot] if command[-1] == "--upgrade" else [*command, "--facts", snapshot]
    proc = run_cli(*args, "-o", str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"hostcheck: error: --output {tmp_path}: ")
