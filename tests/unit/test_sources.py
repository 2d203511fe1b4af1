"""Every cited source is pinned, dated, has a status and a quote; every requirement's severity is
one its source's status allows; docs/sources.md is what the sources generate."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hostcheck.errors import PolicyError
from hostcheck.models import Severity, SourceStatus
from hostcheck.policy import load_shipped, parse_policy, shipped_policy_names

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gen_sources_doc  # noqa: E402

# Written out here rather than imported: a GitHub file, folder or commit at 7-40 hex digits, or
# a Wayback Machine copy at a timestamp.
PINNED = re.compile(r"^https://(github\.com/[^/\s]+/[^/\s]+/(blob|tree|commit)/[0-9a-f]{7,40}(/\S*)?"
                    r"|web\.archive\.org/web/[0-9]{8,14}/https?://\S+)$")
PULL = re.compile(r"^https://github\.com/[^/]+/[^/]+/pull/\d+$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
ALLOWED = {"published": {"blocker", "risk", "advice"}, "merged-pr": {"blocker", "risk", "advice"},
           "draft": {"risk", "advice"},
           "withdrawn": {"risk", "advice"}, "third-party": {"risk", "advice"}}


def test_every_source_is_pinned_dated_with_status_and_quote() -> None:
    rows = gen_sources_doc.collected()
    assert len(rows) > 100  # the policies, the economics and agent data and the watch data all count
    for file, key, source, _ in rows:
        where = f"{file} {key}"
        # A merged pull request cited for its description is its address; every other source is pinned.
        assert (PULL if source.status == SourceStatus.MERGED_PR else PINNED).match(source.url), where
        assert "/blob/main/" not in source.url and "/blob/master/" not in source.url and "pr-preview" not in source.url
        assert DATE.match(source.checked), where
        assert source.status in ALLOWED, where
        assert source.quote.strip(), where
        if source.status == SourceStatus.DRAFT:
            assert PULL.match(source.pull), where
        if source.status == SourceStatus.WITHDRAWN:
            assert DATE.match(source.withdrawn), where


@pytest.mark.parametrize("name", shipped_policy_names())
def test_every_requirement_has_a_severity_its_source_allows(name: str) -> None:
    for req in load_shipped(name).requirements:
        if req.level is None:
            assert str(req.severity) in ALLOWED[str(req.source.status)], (name, req.check)
        if req.source.status in (SourceStatus.DRAFT, SourceStatus.WITHDRAWN):
            assert f"{req.source.status} rule" in req.note, (name, req.check)


POLICY = """format: 1
id: t
title: t
platform: t
kind: platform
summary: t
sources:
  s:
    title: a page
    url: {url}
    checked: 2026-12-03
    status: {status}
{extra}    quote: "the sentence"
requirements:
  - {{check: PWR-1010, severity: {severity}, source: s{note}}}
"""
PINNED_URL = "https://github.com/o/r/blob/0123abc/page.md"
DRAFT = "    pull: https://github.com/o/r/pull/5\n"


@pytest.mark.parametrize(("url", "status", "extra", "severity", "note", "error"), [
    ("https://github.com/o/r/blob/main/page.md", "published", "", "risk", "", "must be pinned"),
    ("https://github.com/o/r/pulls", "published", "", "risk", "", "must be pinned"),
    ("https://nvidia.github.io/x/pr-preview/pr-1/a.html", "published", "", "risk", "", "must be pinned"),
    (PINNED_URL, "draft", DRAFT, "blocker", ", note: draft rule", "severity must be risk, advice"),
    (PINNED_URL, "draft", DRAFT, "risk", "", "the note must say 'draft rule'"),
    (PINNED_URL, "draft", "", "risk", ", note: draft rule", "'pull' is required for status draft"),
    (PINNED_URL, "published", DRAFT, "risk", "", "'pull' is required for status draft and only for it"),
    (PINNED_URL, "withdrawn", "", "risk", ", note: withdrawn rule", "'withdrawn' is required"),
    (PINNED_URL, "third-party", "", "blocker", "", "severity must be risk, advice"),
    ("https://github.com/o/r/pull/5", "published", "", "risk", "", "the url is the pull request's address "
     "for status merged-pr and only for it"),
    (PINNED_URL, "merged-pr", "", "risk", "", "the url is the pull request's address for status merged-pr"),
    ("https://github.com/o/r/pull/5", "merged-pr", DRAFT, "risk", "", "'pull' is required for status draft"),
])
def test_a_source_that_breaks_the_format_is_refused(url: str, status: str, extra: str, severity: str,
                                                     note: str, error: str) -> None:
    text = POLICY.format(url=url, status=status, extra=extra, severity=severity, note=note)
    with pytest.raises(PolicyError, match=re.escape(error)):
        parse_policy(text, "t.yaml")


def test_a_draft_source_with_a_lower_severity_and_its_words_loads() -> None:
    policy = parse_policy(POLICY.format(url=PINNED_URL, status="draft", extra=DRAFT, severity="risk",
                                        note=", note: draft rule"), "t.yaml")
    assert policy.requirements[0].severity == Severity.RISK
    assert policy.requirements[0].source.pull == "https://github.com/o/r/pull/5"


def test_a_merged_pull_request_cited_for_its_description_may_make_a_blocker() -> None:
    policy = parse_policy(POLICY.format(url="https://github.com/o/r/pull/5", status="merged-pr", extra="",
                                        severity="blocker", note=""), "t.yaml")
    source = policy.requirements[0].source
    assert policy.requirements[0].severity == Severity.BLOCKER
    assert source.status_text == "published (merged pull request; the quote is from its description)"


def test_net_1040_explained_shows_its_quotes_and_status() -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    out = CliRunner().invoke(app, ["explain", "NET-1040"], env={"COLUMNS": "200"}).output
    assert 'published, read 2026-12-03: "At least 3 open ports per GPU (100 recommended)"' in out
    assert "draft, not published (pull request #152, https://github.com/vast-ai/docs/pull/152)" in out
    listing = CliRunner().invoke(app, ["explain", "NET-1045"], env={"COLUMNS": "200"}).output
    assert 'published, read 2026-12-03: "An open port range mapped to each machine."' in listing


def test_a_threshold_no_source_gives_is_shown_as_hostchecks_own_choice() -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    policies_with_it = [name for name in shipped_policy_names()
                        if any(r.check == "GPU-1050" for r in load_shipped(name).requirements)]
    assert all(r.own_choice for name in policies_with_it for r in load_shipped(name).requirements
               if r.check == "GPU-1050")
    out = CliRunner().invoke(app, ["explain", "GPU-1050"], env={"COLUMNS": "200"}).output
    # Said once under each source (policies that cite one sentence share its lines).
    cited = {(r.source.url, r.source.quote) for name in policies_with_it for r in load_shipped(name).requirements
             if r.check == "GPU-1050"}
    assert len(policies_with_it) >= 4 and out.count("threshold: hostcheck's own choice.") == len(cited) >= 3


def test_docs_sources_md_is_what_the_sources_generate() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_sources_doc.py"), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
