"""Every command's default output at 80 columns, on every shipped snapshot: the answer first and
short (audit within an 80x24 terminal with the prompt, the others within 40 lines), no line over
the width but a web address alone on its line, no line printed twice, plurals right; and
`audit --details` names each finding once.

The limits are the owner's screen, written here once; nothing below is copied from the output.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from hostcheck.checks import load_registry
from hostcheck.recording.analysis import analyse
from hostcheck.watch.rules import score_all
from tests.helpers import SNAPSHOTS, run_cli
from tests.unit.watch.test_watch import T0, minutes, recording_of
from tests.watch_fixtures import render_watch

WIDTH = 80
AUDIT_LINES = 23  # an 80x24 terminal, one line left for the prompt: the answer never scrolls off
ANSWER_LINES = 40
SNAPSHOT_FILES = sorted(SNAPSHOTS.glob("*.json"))
EARNINGS = ("--electricity", "0.30", "--price", "0.20", "--occupancy", "50")
ENV = {"COLUMNS": str(WIDTH), "XDG_CONFIG_HOME": "/nonexistent"}
# A count of one said with a plural noun, or a "(s)" that leaves the reader to count.
BAD_PLURAL = re.compile(r"(?<![\d.,])\b1 (GPUs|items|sockets|samples|steps|causes|checks|ports|accounts|agents|"
                        r"destinations|models|cores|outages|requirements|sources|containers|adapters|bridges)\b|"
                        r"\w\(s\)")


def assert_reads(text: str, where: str, limit: int) -> None:
    lines = text.rstrip("\n").split("\n")
    assert len(lines) <= limit, f"{where}: {len(lines)} lines (at most {limit})"
    for line in lines:
        alone_url = line.strip().startswith(("<http", "http")) and " " not in line.strip()
        assert len(line) <= WIDTH or alone_url, f"{where}: {len(line)} wide: {line!r}"
        assert line == line.rstrip(), f"{where}: trailing spaces: {line!r}"
    # A statement is never said twice; one word alone that a wrap left on its line may recur.
    said = [line.strip() for line in lines if len(line.split()) > 1]
    twice = sorted({line for line in said if said.count(line) > 1})
    assert not twice, f"{where}: printed twice: {twice}"
    bad = BAD_PLURAL.search(" ".join(text.split()))
    assert bad is None, f"{where}: {bad.group()!r}"


@pytest.mark.parametrize("snapshot", SNAPSHOT_FILES, ids=lambda p: p.stem)
def test_audit_earnings_and_offer_answer_first_on_every_snapshot(snapshot: Path) -> None:
    audit = run_cli("audit", "--facts", str(snapshot), env=ENV)
    assert audit.returncode in (0, 3, 4), audit.stderr
    assert_reads(audit.stdout, f"audit {snapshot.stem}", AUDIT_LINES)
    assert audit.stdout.split("\n", 1)[0].startswith(("Do not host", "Yes,", "No platform", "Not yet known")), \
        f"audit {snapshot.stem}: the first line is not the answer"
    earnings = run_cli("earnings", "--facts", str(snapshot), *EARNINGS, env=ENV)
    assert earnings.returncode in (0, 3, 4), earnings.stderr
    assert_reads(earnings.stdout, f"earnings {snapshot.stem}", ANSWER_LINES)
    offer = run_cli("offer", "--facts", str(snapshot), env=ENV)
    assert offer.returncode == 0, offer.stderr
    assert_reads(offer.stdout, f"offer {snapshot.stem}", ANSWER_LINES)


# A finding's line, with its status (an owner-risk item's level); "(above)" refers back to one.
FINDING = re.compile(r"^(BLOCKER|RISK|UNKNOWN|ERROR|ok|skipped|HIGH|MEDIUM|LOW) ([A-Z]{2,4}-\d{4}) (?!\(above\))", re.M)
UNDECIDED_LINE = re.compile(r"^    ([A-Z]{2,4}-\d{4}) ", re.M)


@pytest.mark.parametrize("snapshot", SNAPSHOT_FILES, ids=lambda p: p.stem)
def test_audit_details_names_every_finding_exactly_once(snapshot: Path) -> None:
    proc = run_cli("audit", "--details", "--facts", str(snapshot), env=ENV)
    report = json.loads(run_cli("audit", "--facts", str(snapshot), "-f", "json", env=ENV).stdout)
    judged = {f["id"] for p in report["policies"] for f in p["findings"]} | \
        {r["id"] for r in report["owner_risk"]["findings"]}
    said = FINDING.findall(proc.stdout) + [("", i) for i in UNDECIDED_LINE.findall(proc.stdout)]
    ids = [check_id for _, check_id in said]
    assert sorted(set(ids)) == sorted(judged), snapshot.stem
    assert len(ids) == len(set(ids)), f"{snapshot.stem}: said twice: {sorted({i for i in ids if ids.count(i) > 1})}"
    for step in report["answer"]["later"]:  # every step the first screen counts is listed
        assert step["action"] in " ".join(proc.stdout.split()), step["action"]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    for line in lines:
        assert len(line) <= WIDTH or line.strip().startswith("<http"), f"{snapshot.stem}: {line!r}"


def test_explain_every_check_and_policies_fit() -> None:
    for check_id in sorted(load_registry()):
        proc = run_cli("explain", check_id, env=ENV)
        assert proc.returncode == 0, proc.stderr
        assert_reads(proc.stdout, f"explain {check_id}", ANSWER_LINES)
    assert_reads(run_cli("policies", env=ENV).stdout, "policies", ANSWER_LINES)


def test_watch_report_of_a_recorded_week_fits() -> None:
    # A week of minute samples with a network outage of 40 minutes each day, and one reboot gap.
    samples = []
    for day in range(7):
        start = T0 + day * 86400
        samples += minutes(start, 600, mono0=day * 86400) + minutes(start + 36000, 40, ok=0, mono0=day * 86400 + 36000)
        samples += minutes(start + 38400, 800, mono0=day * 86400 + 38400)
    analysis = analyse(recording_of(samples), now=samples[-1].t + 60)
    text = render_watch(analysis, score_all(analysis), "week.db", "table", details=False)
    assert_reads(text, "watch report (a week)", ANSWER_LINES)


@cache
def _report_json(snapshot: Path) -> str:
    return run_cli("audit", "--facts", str(snapshot), "-f", "json", env=ENV).stdout


def test_fleet_of_twenty_hosts_fits(tmp_path: Path) -> None:
    hosts = 20
    for number in range(hosts):
        snapshot = SNAPSHOT_FILES[number % len(SNAPSHOT_FILES)]
        (tmp_path / f"host-{number:02d}.json").write_text(_report_json(snapshot))
    proc = run_cli("fleet", str(tmp_path), env=ENV)
    assert proc.returncode in (0, 3, 4), proc.stderr
    assert_reads(proc.stdout, "fleet (20 hosts)", ANSWER_LINES)
    assert all(f"host-{n:02d}" in proc.stdout for n in range(hosts))
