"""The age of what hostcheck knows: every report carries the date its platform rules were read
(the oldest date a source of the judged policies was read), "now" comes from HOSTCHECK_NOW when
set, and `hostcheck policies --stale DAYS` lists the sources read DAYS or more days ago.

Expected sets are computed here from the policy files themselves (read as plain YAML), never
copied from the program's output; no test depends on the clock."""

from __future__ import annotations

import datetime as dt
import json
from functools import cache
from pathlib import Path

import pytest
import yaml

from hostcheck.errors import UsageError
from hostcheck.facts import load_snapshot
from hostcheck.policy import resolve_policies
from hostcheck.report import build_report
from hostcheck.rules_age import NOW_ENV, now
from tests.helpers import REPO, SNAPSHOTS, run_cli

POLICIES = REPO / "policies"


@cache
def listed() -> dict[tuple[str, str], str]:
    """(policy id, source key) -> the date it was read, for every source every policy file lists."""
    rows = {}
    for path in sorted(POLICIES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for key, source in doc["sources"].items():
            rows[(doc["id"], key)] = str(source["checked"])
    return rows


def cited_dates(path: Path) -> list[str]:
    """The dates of the sources the file's requirements cite."""
    doc = yaml.safe_load(path.read_text())
    return [str(doc["sources"][r["source"]]["checked"]) for r in doc["requirements"]]


def test_a_report_says_the_oldest_date_any_rule_it_judged_by_was_read() -> None:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    owner_risk = cited_dates(POLICIES / "owner-risk.yaml")
    for names in (["vast"], ["salad-linux", "ionet"], []):
        files = [POLICIES / f"{n}.yaml" for n in names] or [
            p for p in POLICIES.glob("*.yaml") if p.stem != "owner-risk"]
        expected = min([d for f in files for d in cited_dates(f)] + owner_risk)
        report = build_report(facts, resolve_policies(names), dt.datetime(2027, 1, 2, tzinfo=dt.UTC))
        assert report.rules_read == expected, names
        assert report.as_dict()["rules_read"] == expected
        assert report.generated_at == "2027-01-02T00:00:00+00:00"


def test_now_is_the_clock_unless_hostcheck_now_names_a_day(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NOW_ENV, "2027-03-04")
    assert now() == dt.datetime(2027, 3, 4, tzinfo=dt.UTC)
    monkeypatch.setenv(NOW_ENV, "2027-03-04T10:00:00+02:00")
    assert now() == dt.datetime(2027, 3, 4, 8, tzinfo=dt.UTC)
    report = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), resolve_policies(["vast"]))
    assert report.generated_at == "2027-03-04T08:00:00+00:00"
    monkeypatch.setenv(NOW_ENV, "next tuesday")
    with pytest.raises(UsageError, match=NOW_ENV):
        now()
    monkeypatch.delenv(NOW_ENV)
    before = dt.datetime.now(dt.UTC)
    assert before <= now() <= dt.datetime.now(dt.UTC)


def _stale(days: int, today: str, *more: str) -> tuple[int, str]:
    proc = run_cli("policies", "--stale", str(days), *more, env={NOW_ENV: today})
    assert not proc.stderr, proc.stderr
    return proc.returncode, proc.stdout


@pytest.mark.parametrize("today", ["2026-12-07", "2027-06-30"])
def test_stale_zero_lists_every_source_and_a_long_window_none(today: str) -> None:
    code, out = _stale(0, today, "--format", "json")
    assert code == 3
    rows = json.loads(out)
    assert {(r["policy"], r["key"]): r["checked"] for r in rows["stale"]} == listed()
    assert len(rows["stale"]) == rows["sources"] == len(listed())
    for r in rows["stale"]:
        assert r["days"] == (dt.date.fromisoformat(today) - dt.date.fromisoformat(r["checked"])).days
    code, out = _stale(10000, today, "--format", "json")
    assert (code, json.loads(out)["stale"]) == (0, [])
    code, out = _stale(10000, today)
    assert code == 0
    assert out.startswith(f"All {len(listed())} sources of the shipped policies were read within the last 10000 days")


def test_stale_lists_exactly_the_sources_read_days_or_more_before_today() -> None:
    dates = sorted(set(listed().values()))
    oldest, newest = dt.date.fromisoformat(dates[0]), dt.date.fromisoformat(dates[-1])
    today = newest + dt.timedelta(days=30)
    for days in (30, (today - oldest).days, (today - oldest).days + 1):
        cutoff = today - dt.timedelta(days=days)
        expected = {k for k, d in listed().items() if dt.date.fromisoformat(d) <= cutoff}
        code, out = _stale(days, today.isoformat(), "--format", "json")
        got = json.loads(out)["stale"]
        assert {(r["policy"], r["key"]) for r in got} == expected, days
        assert [r["checked"] for r in got] == sorted(r["checked"] for r in got)  # oldest first
        assert code == (3 if expected else 0)
    # The table: a header with the count, then each source (policy, key, date, age) and its URL.
    code, out = _stale(30, today.isoformat())
    lines = out.splitlines()
    expected = {k: d for k, d in listed().items() if dt.date.fromisoformat(d) <= newest}
    assert code == 3
    assert " ".join(lines[:2]).startswith(f"{len(expected)} of {len(listed())} sources of the shipped policies "
                                          "not re-read within the last 30 days")
    for (policy, key), checked in expected.items():
        age = (today - dt.date.fromisoformat(checked)).days
        assert f"  {policy} {key}: read {checked} ({age} days ago)" in lines
    assert all(len(line) <= 80 or line.strip().startswith("<https://") for line in lines)


@pytest.mark.parametrize("days", ["-1", "x", "100001"])
def test_a_bad_window_is_bad_input(days: str) -> None:
    proc = run_cli("policies", "--stale", days)
    assert proc.returncode == 2 and not proc.stdout
    assert "--stale" in proc.stderr


def test_a_bad_hostcheck_now_is_bad_input() -> None:
    proc = run_cli("policies", "--stale", "1", env={NOW_ENV: "2026-13-01"})
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"hostcheck: error: {NOW_ENV}='2026-13-01': not an ISO 8601 date or time (e.g. 2026-12-01)\n"


def test_a_report_written_without_the_date_still_reads_and_renders_without_it() -> None:
    """Reports written before the field (a fleet gathers reports of several versions) read back;
    no format then claims a date."""
    from hostcheck.checks import family_prefixes
    from hostcheck.models import Report
    from hostcheck.render import render

    report = build_report(load_snapshot(SNAPSHOTS / "reference-laptop.json"), resolve_policies(["vast"]),
                          dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    written = report.as_dict()
    del written["rules_read"]
    older = Report.from_json(json.dumps(written), family_prefixes())
    assert older.rules_read is None and "rules_read" not in older.as_dict()
    for fmt in ("table", "markdown", "json"):
        text = render(older, fmt)
        assert "rules read" not in text.lower() and "rules_read" not in text, fmt
