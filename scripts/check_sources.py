#!/usr/bin/env python3
"""Re-verify every source pinned at a commit of a GitHub repository against local git copies.

For each source (the policies and the data files: the rows of docs/sources.md) whose url is a
GitHub ``blob``, ``tree`` or ``commit`` address at a commit, and whose repository has a local
copy, it checks:

- the pin: the commit exists in the copy and is reachable from the repository's default branch
  (``origin/HEAD`` in a clone, ``HEAD`` in a bare mirror); otherwise the source must be labelled
  ``draft`` or ``withdrawn``. A draft whose commit is on the default branch was merged, and a
  withdrawn page still on the default branch's tip was not removed: both fail too.
- the quote: found in the file at that commit (every file under a ``tree`` address; a
  ``commit`` address's message and patch), ignoring markup (Markdown and MDX emphasis, links,
  tags, table pipes, headings; a manual page's font escapes and requests) and whitespace.

Where copies are looked for: each folder given with ``--mirrors DIR`` (repeatable), else those in
``HOSTCHECK_SOURCE_MIRRORS`` (separated by ``:``). A folder may hold ``OWNER+NAME/repo`` bare
mirrors, ``OWNER+NAME`` or ``OWNER/NAME`` (bare, ``.git`` or a clone). The repository does not ship
copies; a source with none, an archived copy (web.archive.org) and a copy older than the
reading are counted as "could not check", and said.

    .venv/bin/python scripts/check_sources.py --mirrors /srv/mirrors   # exit 1 when one failed

Exit codes: 0 when none failed (also when nothing could be checked), 1 when one failed, 2 for
bad usage (a --mirrors folder that does not exist).
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
MIRRORS_ENV = "HOSTCHECK_SOURCE_MIRRORS"
GIT_TIMEOUT_S = 60
MAX_FILE_BYTES = 8 * 1024 * 1024  # a documentation page or a script is far smaller
MAX_TREE_FILES = 400  # files read under a ``tree`` address
MAX_LISTED_NAMES = 200
MAX_HISTORY = 500  # commits read after a withdrawn page's pin, looking for the one that removed it  # entries of a mirrors folder looked through for a repository's name

PIN = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+)/(?P<kind>blob|tree|commit)/"
                 r"(?P<commit>[0-9a-f]{7,40})(?:/(?P<path>[^?#\s]*))?(?:[?#]\S*)?$")

PASSED, FAILED, UNCHECKED = "passed", "failed", "could not check"
NOT_PUBLISHED = ("draft", "withdrawn")


# ------------------------------------------------------------------ quotes, ignoring markup


_LINK = re.compile(r"!?\[([^\]]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")  # [text](url), ![alt](src)
_REF_LINK = re.compile(r"\[([^\]]*)\]\[[^\]]*\]")  # [text][ref]
_TAG = re.compile(r"</?[A-Za-z][\w.:-]*(?:\s[^<>]*)?/?>")  # <b>, </Note>, <Tip title="x">, <br/>
_TYPOGRAPHY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                             "\u2014": "-", "\u00a0": " ", "\u2026": "..."})
_MARKS = str.maketrans("", "", "*_`|#>\\~")  # emphasis, code, table pipes, headings, quotes, escapes
_ROFF_FONT = re.compile(r"\\f(?:\(..|\[[^\]]*\]|.)")  # a manual page's \fB, \fR, \f(CW, \f[B]
_ROFF_REQUEST = re.compile(r"^\.[A-Za-z]{1,2}(?:[ \t]+|$)", re.M)  # .B word, .TP, .PP at a line's start
_ELLIPSIS = re.compile(r"\s*(?:\[\.\.\.\]|\.\.\.)\s*")


def normalize(text: str) -> str:
    """``text`` without markup and whitespace: what a quote and a page are compared on."""
    text = html.unescape(text).translate(_TYPOGRAPHY)
    text = _ROFF_REQUEST.sub("", _ROFF_FONT.sub("", text)).replace("\\-", "-")
    text = _REF_LINK.sub(r"\1", _LINK.sub(r"\1", text))
    text = _TAG.sub(" ", text).translate(_MARKS)
    return "".join(text.split())


def quote_found(quote: str, page: str) -> bool:
    """The quote is in the page, markup and whitespace aside; a quote that leaves words out
    ("...") has its parts in the page in order."""
    parts = [normalize(part) for part in _ELLIPSIS.split(quote.translate(_TYPOGRAPHY))]
    parts = [part for part in parts if part]
    if not parts:
        return False
    text, at = normalize(page), 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


# ------------------------------------------------------------------ pins and copies


@dataclass(frozen=True)
class Pin:
    owner: str
    name: str
    kind: str  # blob, tree or commit
    commit: str
    path: str

    @property
    def repo(self) -> str:
        return f"{self.owner}/{self.name}"


def parse_pin(url: str) -> Pin | None:
    """The repository, kind, commit and path of a GitHub address at a commit; None for any other."""
    match = PIN.match(url)
    if match is None:
        return None
    return Pin(match["owner"], match["name"], match["kind"], match["commit"],
               unquote(match["path"] or "").strip("/"))


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() or (path / ".git").exists()


def _named(folder: Path, name: str) -> Path | None:
    """``folder/name``, or the entry whose name matches it but for case (GitHub's names are not
    case-sensitive); None when there is none."""
    exact = folder / name
    if exact.exists():
        return exact
    try:
        with os.scandir(folder) as entries:
            for number, entry in enumerate(entries):
                if number >= MAX_LISTED_NAMES:
                    break
                if entry.name.lower() == name.lower():
                    return Path(entry.path)
    except OSError:
        return None
    return None


def find_copy(roots: Iterable[Path], owner: str, name: str) -> Path | None:
    """The first local git copy of OWNER/NAME under ``roots``: OWNER+NAME/repo (the layout of a
    mirror store), OWNER+NAME[.git], OWNER/NAME[.git]."""
    for root in roots:
        candidates: list[Path | None] = []
        joined = _named(root, f"{owner}+{name}")
        candidates += [joined / "repo" if joined else None, joined, _named(root, f"{owner}+{name}.git")]
        by_owner = _named(root, owner)
        if by_owner is not None:
            candidates += [_named(by_owner, name), _named(by_owner, f"{name}.git")]
        for candidate in candidates:
            if candidate is not None and candidate.is_dir() and _is_git_dir(candidate):
                return candidate
    return None


class Copy:
    """A local git copy of one repository, read with ``git`` (bounded by a timeout each call)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tip: tuple[str, str] | None = None
        self._looked = False

    def git(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[bytes]:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
        return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(self.path), *args],
                              capture_output=True, timeout=GIT_TIMEOUT_S, env=env, check=check)

    def _out(self, *args: str) -> str | None:
        proc = self.git(*args)
        return proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else None

    def commit(self, hexa: str) -> str | None:
        """The full id of the commit ``hexa`` names (None: not in the copy, or ambiguous)."""
        return self._out("rev-parse", "--verify", "--quiet", f"{hexa}^{{commit}}")

    def tip(self) -> tuple[str, str] | None:
        """The default branch: its name and its commit (None: the copy has none)."""
        if not self._looked:
            for ref in ("refs/remotes/origin/HEAD", "HEAD"):
                sha = self._out("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
                if sha:
                    self._tip = (self._out("symbolic-ref", "--quiet", "--short", ref) or ref, sha)
                    break
            self._looked = True  # only once git has answered
        return self._tip

    def newest(self) -> dt.date | None:
        """The date of the newest commit any branch of the copy holds: how recent the copy is."""
        when = self._out("for-each-ref", "--sort=-committerdate", "--count=1", "--format=%(committerdate:short)",
                         "refs/heads", "refs/remotes")
        return dt.date.fromisoformat(when) if when else None

    def quote_gone(self, sha: str, tip: str, path: str, quote: str) -> tuple[str, ...] | None:
        """The day the default branch (ending at ``tip``) first held ``path`` without ``quote``
        after commit ``sha`` (the file deleted, or the sentence taken out): its committer's day,
        then the UTC day where they differ. None when the quote is still there at ``tip``."""
        listing = self._out("log", "--reverse", "--ancestry-path", "--no-renames", "--format=%H %cs %ct",
                            f"{sha}..{tip}", "--", path) or ""
        for line in listing.splitlines()[:MAX_HISTORY]:
            commit, day, epoch = line.split()
            page = self.read(commit, path)
            if page is None or not quote_found(quote, page):
                utc = dt.datetime.fromtimestamp(int(epoch), dt.UTC).date().isoformat()
                return tuple(dict.fromkeys((day, utc)))
        return None

    def reachable(self, sha: str, tip: str) -> bool:
        return self.git("merge-base", "--is-ancestor", sha, tip).returncode == 0

    def has_path(self, sha: str, path: str) -> bool:
        return self.git("cat-file", "-e", f"{sha}:{path}").returncode == 0

    def read(self, sha: str, path: str) -> str | None:
        """The file at that commit (None: no such file, or larger than MAX_FILE_BYTES)."""
        size = self._out("cat-file", "-s", f"{sha}:{path}")
        if size is None or not size.isdigit() or int(size) > MAX_FILE_BYTES:
            return None
        proc = self.git("cat-file", "blob", f"{sha}:{path}")
        return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None

    def tree_text(self, sha: str, path: str) -> str | None:
        """Every file under the folder at that commit, one after the other (bounded)."""
        listing = self._out("ls-tree", "-r", "--name-only", sha, "--", path or ".")
        if not listing:
            return None
        texts = [self.read(sha, name) or "" for name in listing.splitlines()[:MAX_TREE_FILES]]
        return "\n".join(texts)

    def commit_text(self, sha: str) -> str | None:
        """A commit's message and the lines its patch adds or keeps."""
        proc = self.git("show", "--no-color", "--format=%B", sha)
        if proc.returncode != 0:
            return None
        lines = proc.stdout[:MAX_FILE_BYTES].decode("utf-8", "replace").splitlines()
        kept = [line[1:] if line[:1] in "+ " and not line.startswith("+++") else line
                for line in lines if not line.startswith(("-", "@@", "diff --git", "index "))]
        return "\n".join(kept)


# ------------------------------------------------------------------ one source


@dataclass(frozen=True)
class Outcome:
    where: str  # the file and key, as docs/sources.md lists them
    outcome: str  # PASSED, FAILED or UNCHECKED
    reason: str  # why it failed or could not be checked ('' when it passed)
    repo: str = ""  # OWNER/NAME of a GitHub pin


def check_pinned(where: str, pin: Pin, source: Any, copy: Copy) -> Outcome:
    """One source (its ``status``, ``checked``, ``withdrawn`` and ``quote``) pinned at a commit of
    ``copy``'s repository: the pin, then the quote."""
    def result(outcome: str, reason: str = "") -> Outcome:
        return Outcome(where, outcome, reason, pin.repo)

    status, short = str(source.status), pin.commit[:12]
    tip = copy.tip()
    if tip is None:
        return result(UNCHECKED, f"the copy of {pin.repo} has no default branch")
    branch, tip_sha = tip
    sha = copy.commit(pin.commit)
    if sha is None:
        if status in NOT_PUBLISHED:
            return result(UNCHECKED, f"commit {short} is not in the copy of {pin.repo} (a {status} page's "
                                     "commit may live only in a pull request the copy did not fetch)")
        newest = copy.newest()
        if newest is None or newest < dt.date.fromisoformat(source.checked):
            return result(UNCHECKED, f"commit {short} is not in the copy of {pin.repo}, whose newest commit "
                                     f"({newest}) is older than the reading ({source.checked}): update the copy")
        return result(FAILED, f"commit {short} does not exist in {pin.repo} (copy up to {newest}), "
                              f"yet the source is {status}")
    on_default = copy.reachable(sha, tip_sha)
    if not on_default and status != "draft":
        label = "a withdrawn page's last version is on it" if status == "withdrawn" else f"the source is {status}"
        return result(FAILED, f"commit {short} is not on {pin.repo}'s default branch ({branch}), yet {label}: "
                              f"cite a commit of {branch}, or label it draft (with its pull request)")
    if on_default and status == "draft":
        return result(FAILED, f"commit {short} is on {pin.repo}'s default branch ({branch}): the draft "
                              "was merged; read the page again and label it published")
    if pin.kind == "blob":
        page, what = copy.read(sha, pin.path), pin.path
    elif pin.kind == "tree":
        page, what = copy.tree_text(sha, pin.path), f"the files under {pin.path or '/'}"
    else:
        page, what = copy.commit_text(sha), "the commit's message and patch"
    if page is None:
        return result(FAILED, f"{what} cannot be read at commit {short} of {pin.repo}")
    if not quote_found(source.quote, page):
        return result(FAILED, f"the quote is not in {what} at commit {short} of {pin.repo}")
    if status == "withdrawn" and pin.kind == "blob":
        gone = copy.quote_gone(sha, tip_sha, pin.path, source.quote)
        if gone is None:
            return result(FAILED, f"the quote is still in {pin.path} on {pin.repo}'s {branch}, yet the source "
                                  "is withdrawn")
        if str(source.withdrawn) not in gone:
            return result(FAILED, f"the quote left {pin.path} on {pin.repo}'s {branch} on {gone[0]}, "
                                  f"not {source.withdrawn}")
    return result(PASSED)


def check_sources(rows: Sequence[tuple[str, str, Any]], roots: Sequence[Path]) -> list[Outcome]:
    """(file, key, source) rows checked against the copies under ``roots``."""
    copies: dict[str, Copy | None] = {}
    outcomes = []
    for file, key, source in rows:
        where = f"{file} {key}"
        pin = parse_pin(source.url)
        if pin is None:
            outcomes.append(Outcome(where, UNCHECKED, "not a GitHub address at a commit (an archived copy)"))
            continue
        if pin.repo.lower() not in copies:
            path = find_copy(roots, pin.owner, pin.name)
            copies[pin.repo.lower()] = None if path is None else Copy(path)
        copy = copies[pin.repo.lower()]
        if copy is not None and shutil.which("git") is None:
            outcomes.append(Outcome(where, UNCHECKED, "git is not installed", pin.repo))
            continue
        if copy is None:
            outcomes.append(Outcome(where, UNCHECKED, f"no local copy of {pin.repo}", pin.repo))
            continue
        try:
            outcomes.append(check_pinned(where, pin, source, copy))
        except subprocess.TimeoutExpired:
            outcomes.append(Outcome(where, UNCHECKED, f"git did not answer within {GIT_TIMEOUT_S} s", pin.repo))
        except OSError as exc:  # no git to run
            outcomes.append(Outcome(where, UNCHECKED, f"git cannot run: {exc.strerror or exc}", pin.repo))
    return outcomes


# ------------------------------------------------------------------ the report


@dataclass
class Summary:
    outcomes: list[Outcome]
    counts: Counter[str] = field(init=False)

    def __post_init__(self) -> None:
        self.counts = Counter(o.outcome for o in self.outcomes)

    def lines(self, roots: Sequence[Path]) -> list[str]:
        total, unchecked = len(self.outcomes), self.counts[UNCHECKED]
        checked = self.counts[PASSED] + self.counts[FAILED]
        head = [f"{total} sources: {checked} checked ({self.counts[PASSED]} passed, {self.counts[FAILED]} failed), "
                f"{unchecked} could not be checked."]
        if not roots:
            head.append(f"No local copies given (--mirrors DIR or {MIRRORS_ENV}): no pin or quote was checked.")
        out = head
        missing = Counter(o.repo for o in self.outcomes if o.reason.startswith("no local copy of "))
        other = Counter(o.reason for o in self.outcomes
                        if o.outcome == UNCHECKED and not o.reason.startswith("no local copy of "))
        if unchecked:
            out.append("Could not check:")
            if missing:
                out.append("  no local copy of " + ", ".join(f"{repo} ({n})" for repo, n in sorted(missing.items())))
            stale_copies = [o for o in self.outcomes if o.outcome == UNCHECKED and "update the copy" in o.reason]
            for reason, n in sorted(other.items()):
                if "update the copy" not in reason:
                    out.append(f"  {n} x {reason}")
            out += [f"  {o.where}: {o.reason}" for o in stale_copies]
        failed = [o for o in self.outcomes if o.outcome == FAILED]
        if failed:
            out.append("Failed:")
            out += [f"  {o.where}: {o.reason}" for o in failed]
        return out


def mirror_roots(given: Sequence[str], environ: dict[str, str]) -> list[Path]:
    """The folders to look for copies in: --mirrors, else HOSTCHECK_SOURCE_MIRRORS."""
    raw = list(given) or [part for part in environ.get(MIRRORS_ENV, "").split(os.pathsep) if part.strip()]
    return [Path(part).expanduser() for part in raw]


def shipped_rows() -> list[tuple[str, str, Any]]:
    """Every source the policies and data files cite (the rows of docs/sources.md)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_sources_doc

    return [(file, key, source) for file, key, source, _ in gen_sources_doc.collected()]


def main(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Re-verify the pinned sources against local git copies.")
    parser.add_argument("--mirrors", action="append", default=[], metavar="DIR",
                        help=f"a folder of git copies (repeatable; default: ${MIRRORS_ENV}, ':'-separated)")
    args = parser.parse_args(argv)
    roots = mirror_roots(args.mirrors, dict(os.environ) if environ is None else environ)
    absent = [str(root) for root in roots if not root.is_dir()]
    if absent:
        print(f"check_sources: error: not a folder: {', '.join(absent)}", file=sys.stderr)
        return 2
    summary = Summary(check_sources(shipped_rows(), roots))
    try:
        print("\n".join(summary.lines(roots)), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stdout = open(os.devnull, "w")  # so the interpreter's final flush has somewhere to go
    return 1 if summary.counts[FAILED] else 0


if __name__ == "__main__":
    sys.exit(main())
