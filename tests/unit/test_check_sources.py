"""scripts/check_sources.py: its logic on a small git repository built here (a default branch
holding the quotes, a side branch that was never merged, a later commit that takes a sentence
out), copied the two ways a mirrors folder holds copies (a bare OWNER+NAME/repo mirror, an
OWNER/NAME clone checked out on another branch); and a run on the shipped sources against
whatever copies HOSTCHECK_SOURCE_MIRRORS names (none in CI: it says so and passes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcheck.models import Source, SourceStatus
from tests.helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))
import check_sources as cs

PAGE = """---
title: Hosting
---

# Requirements

Hosts need **at least** [16 GB](/ram) of <Tooltip tip="memory">system RAM</Tooltip> per GPU.

| Item | Minimum |
|------|---------|
| Upload | 100 Mbps |

Machines below 90% reliability are delisted.
"""
SIDE_PAGE = PAGE + "\nA rule only the side branch holds.\n"
REMOVED_ON = "2026-04-01"


def _git(cwd: Path, *args: str, date: str = "2026-03-01") -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_AUTHOR_DATE": f"{date}T12:00:00+00:00",
           "GIT_COMMITTER_DATE": f"{date}T12:00:00+00:00", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_CONFIG_NOSYSTEM": "1"}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=True)
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The repository as GitHub would hold it, and its commits by what they are."""
    work = tmp_path_factory.mktemp("upstream")
    _git(work, "init", "-q", "-b", "main")
    (work / "docs").mkdir()
    (work / "docs" / "hosting.mdx").write_text(PAGE)
    (work / "docs" / "other.md").write_text("A tree address finds *this* sentence.\n")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "Hosting requirements: a commit message quoted")
    published = _git(work, "rev-parse", "HEAD")
    _git(work, "checkout", "-q", "-b", "side")
    (work / "docs" / "hosting.mdx").write_text(SIDE_PAGE)
    _git(work, "commit", "-q", "-am", "side", date="2026-03-10")
    side = _git(work, "rev-parse", "HEAD")
    _git(work, "checkout", "-q", "main")
    (work / "docs" / "hosting.mdx").write_text(PAGE.replace("Machines below 90% reliability are delisted.\n", ""))
    _git(work, "commit", "-q", "-am", "drop the reliability rule", date=REMOVED_ON)
    return {"work": work, "published": published, "side": side}


@pytest.fixture(scope="module")
def mirrors(upstream: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A mirror store (acme+docs/repo, bare) and a folder of clones (acme/docs, checked out on
    the side branch, so only origin/HEAD says which branch is the default)."""
    store = tmp_path_factory.mktemp("store")
    (store / "acme+docs").mkdir()
    _git(store, "clone", "-q", "--mirror", str(upstream["work"]), str(store / "acme+docs" / "repo"))
    clones = tmp_path_factory.mktemp("clones")
    (clones / "acme").mkdir()
    _git(clones, "clone", "-q", str(upstream["work"]), str(clones / "acme" / "docs"))
    _git(clones / "acme" / "docs", "checkout", "-q", "side")
    return {"store": store, "clones": clones}


def source(url: str, quote: str, status: str = "published", checked: str = "2026-12-01", **more: str) -> Source:
    return Source(key="k", url=url, title="t", checked=checked, status=SourceStatus(status), quote=quote, **more)


def blob(commit: str, path: str = "docs/hosting.mdx") -> str:
    return f"https://github.com/acme/docs/blob/{commit}/{path}"


def outcome(src: Source, roots: list[Path]) -> cs.Outcome:
    (result,) = cs.check_sources([("policies/x.yaml", "k", src)], roots)
    return result


RAM = "Hosts need at least 16 GB of system RAM per GPU."
RELIABILITY = "Machines below 90% reliability are delisted."


@pytest.mark.parametrize("layout", ["store", "clones"])
def test_a_pin_on_the_default_branch_with_its_quote_passes(upstream: dict[str, Any], mirrors: dict[str, Path],
                                                           layout: str) -> None:
    roots = [mirrors[layout]]
    for commit in (upstream["published"], upstream["published"][:7]):
        assert outcome(source(blob(commit), RAM), roots).outcome == cs.PASSED
    # Markup and whitespace aside (emphasis, a link, an MDX tag, table pipes), and a quote with its own markup.
    assert outcome(source(blob(upstream["published"]), "| Upload | 100 Mbps |"), roots).outcome == cs.PASSED
    assert outcome(source(blob(upstream["published"]), "Upload 100 Mbps"), roots).outcome == cs.PASSED
    assert outcome(source(blob(upstream["published"]), "**at least** 16 GB"), roots).outcome == cs.PASSED
    tree = f"https://github.com/acme/docs/tree/{upstream['published']}/docs"
    assert outcome(source(tree, "A tree address finds this sentence."), roots).outcome == cs.PASSED
    commit = f"https://github.com/acme/docs/commit/{upstream['published']}"
    assert outcome(source(commit, "a commit message quoted"), roots).outcome == cs.PASSED


@pytest.mark.parametrize("layout", ["store", "clones"])
def test_a_quote_the_page_does_not_hold_fails(upstream: dict[str, Any], mirrors: dict[str, Path], layout: str) -> None:
    roots = [mirrors[layout]]
    for quote in ("Hosts need at least 32 GB of system RAM per GPU.", "hosts need at least 16 GB of system RAM per GPU.",
                  "A rule only the side branch holds."):
        result = outcome(source(blob(upstream["published"]), quote), roots)
        assert (result.outcome, result.reason) == (
            cs.FAILED, f"the quote is not in docs/hosting.mdx at commit {upstream['published'][:12]} of acme/docs")
    result = outcome(source(blob(upstream["published"], "docs/gone.mdx"), RAM), roots)
    assert result.outcome == cs.FAILED and "docs/gone.mdx cannot be read" in result.reason


@pytest.mark.parametrize("layout", ["store", "clones"])
def test_a_pin_off_the_default_branch_is_a_draft_or_fails(upstream: dict[str, Any], mirrors: dict[str, Path],
                                                          layout: str) -> None:
    roots, side = [mirrors[layout]], upstream["side"]
    result = outcome(source(blob(side), "A rule only the side branch holds."), roots)
    assert result.outcome == cs.FAILED
    assert f"commit {side[:12]} is not on acme/docs's default branch (" in result.reason
    pull = "https://github.com/acme/docs/pull/7"
    assert outcome(source(blob(side), "A rule only the side branch holds.", "draft", pull=pull),
                   roots).outcome == cs.PASSED
    # A draft whose commit is on the default branch was merged: its label is out of date.
    merged = outcome(source(blob(upstream["published"]), RAM, "draft", pull=pull), roots)
    assert merged.outcome == cs.FAILED and "the draft was merged" in merged.reason
    # A withdrawn page was published: its pin is on the default branch, not on a side branch.
    withdrawn = outcome(source(blob(side), RELIABILITY, "withdrawn", withdrawn=REMOVED_ON), roots)
    assert withdrawn.outcome == cs.FAILED and "yet a withdrawn page's last version is on it" in withdrawn.reason


@pytest.mark.parametrize("layout", ["store", "clones"])
def test_a_withdrawn_quote_left_the_default_branch_on_its_date(upstream: dict[str, Any], mirrors: dict[str, Path],
                                                               layout: str) -> None:
    roots, pin = [mirrors[layout]], blob(upstream["published"])
    assert outcome(source(pin, RELIABILITY, "withdrawn", withdrawn=REMOVED_ON), roots).outcome == cs.PASSED
    wrong = outcome(source(pin, RELIABILITY, "withdrawn", withdrawn="2026-03-31"), roots)
    branch = "main" if layout == "store" else "origin/main"  # a clone's default branch is its origin's
    assert (wrong.outcome, wrong.reason) == (
        cs.FAILED, f"the quote left docs/hosting.mdx on acme/docs's {branch} on {REMOVED_ON}, not 2026-03-31")
    still = outcome(source(pin, RAM, "withdrawn", withdrawn=REMOVED_ON), roots)
    assert still.outcome == cs.FAILED and "the quote is still in docs/hosting.mdx" in still.reason


def test_a_commit_the_copy_lacks(upstream: dict[str, Any], mirrors: dict[str, Path]) -> None:
    roots, missing = [mirrors["store"]], "0123456789abcdef0123456789abcdef01234567"
    # The copy's newest commit is the removal (REMOVED_ON): a reading after it may cite newer commits.
    later = outcome(source(blob(missing), RAM, checked="2026-12-01"), roots)
    assert later.outcome == cs.UNCHECKED and later.reason.endswith("update the copy")
    earlier = outcome(source(blob(missing), RAM, checked=REMOVED_ON), roots)
    assert earlier.outcome == cs.FAILED and "does not exist in acme/docs" in earlier.reason
    draft = outcome(source(blob(missing), RAM, "draft", pull="https://github.com/acme/docs/pull/7"), roots)
    assert draft.outcome == cs.UNCHECKED and "pull request" in draft.reason


def test_no_copy_and_archived_pages_are_counted_as_not_checked(mirrors: dict[str, Path]) -> None:
    rows = [("a.yaml", "other", source("https://github.com/other/repo/blob/abcdef0/x.md", RAM)),
            ("a.yaml", "archived", source("https://web.archive.org/web/20261129000000/https://example.com/", RAM))]
    results = cs.check_sources(rows, [mirrors["store"]])
    assert [(r.outcome, r.reason) for r in results] == [
        (cs.UNCHECKED, "no local copy of other/repo"),
        (cs.UNCHECKED, "not a GitHub address at a commit (an archived copy)")]
    lines = cs.Summary(results).lines([mirrors["store"]])
    assert lines[0] == "2 sources: 0 checked (0 passed, 0 failed), 2 could not be checked."
    assert "  no local copy of other/repo (1)" in lines


def test_the_quote_comparison_ignores_markup_and_whitespace_only() -> None:
    page = "Use <b>Ubuntu</b> 22.04 &amp; 24.04 (see [the list](https://x.example/a_b)).\n\n| a | b |"
    assert cs.quote_found("Use Ubuntu 22.04 & 24.04 (see the list).", page)
    assert cs.quote_found("Use Ubuntu ... 24.04", page)
    assert cs.quote_found("a b", page)
    assert not cs.quote_found("Use Ubuntu 20.04", page)
    assert not cs.quote_found("24.04 ... Use Ubuntu", page)  # the parts in the page's order
    assert not cs.quote_found("", page)
    assert cs.quote_found("it\u2019s \u201cfine\u201d", "it's \"fine\"")
    manual = ".TP\nOn installation, \\fBufw\\fR is disabled\n.B ufw\n\\-\\-dry\\-run"
    assert cs.quote_found("On installation, ufw is disabled ufw --dry-run", manual)
    assert not cs.quote_found("On installation, ufw is enabled", manual)


def test_the_shipped_sources_against_the_copies_found() -> None:
    """Against the copies HOSTCHECK_SOURCE_MIRRORS names; where there are none (CI), the script
    says that nothing was checked, counts every source as not checked, and passes."""
    roots = cs.mirror_roots([], dict(os.environ))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "check_sources.py")], capture_output=True,
                          text=True, timeout=600, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    total = len(cs.shipped_rows())
    lines = proc.stdout.splitlines()
    if not roots:
        assert proc.returncode == 0, proc.stderr
        assert lines[:2] == [
            f"{total} sources: 0 checked (0 passed, 0 failed), {total} could not be checked.",
            f"No local copies given (--mirrors DIR or {cs.MIRRORS_ENV}): no pin or quote was checked."]
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr  # a failure names each source and why
    assert lines[0].startswith(f"{total} sources: ")


def test_a_mirrors_folder_that_does_not_exist_is_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cs.main(["--mirrors", str(tmp_path / "none")], environ={}) == 2
    assert capsys.readouterr().err == f"check_sources: error: not a folder: {tmp_path / 'none'}\n"
