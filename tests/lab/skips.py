"""Every skip, said at the end of the run: each reason with its count, and whether
tests/allowed_skips.toml allows it.

scripts/test sets ``HOSTCHECK_STRICT_SKIPS=1``: a skip reason the allow-list does not name
then fails the run (a skip that depends on what happens to be installed hides coverage).
Under pytest-xdist the workers' reports reach the controller's ``pytest_runtest_logreport``
(and a module skipped whole its ``pytest_collectreport``), so the controller alone counts and
decides.
"""

from __future__ import annotations

import os
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ALLOW_LIST = Path(__file__).resolve().parents[1] / "allowed_skips.toml"
STRICT_ENV = "HOSTCHECK_STRICT_SKIPS"


def allowed_reasons(path: Path = ALLOW_LIST) -> dict[str, str]:
    """reason -> why, from the allow-list; an entry without both is an error, not ignored."""
    entries = tomllib.loads(path.read_text()).get("allowed", [])
    out: dict[str, str] = {}
    for entry in entries:
        reason, why = entry.get("reason"), entry.get("why")
        if not (isinstance(reason, str) and reason and isinstance(why, str) and why.strip()):
            raise ValueError(f"{path}: every entry needs a reason and a why: {entry!r}")
        out[reason] = why
    return out


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    """The reason of a skipped report (not of an xfail), as the test gave it."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr: Any = report.longrepr
    # (path, line, "Skipped: reason"): a tuple in-process, a list once xdist has carried it
    reason = str(longrepr[2]) if isinstance(longrepr, tuple | list) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


class SkipSummary:
    def __init__(self, allowed: dict[str, str], strict: bool) -> None:
        self.allowed = allowed
        self.strict = strict
        self.counts: Counter[str] = Counter()

    def _count(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        reason = skip_reason(report)
        if reason is not None:
            self.counts[reason] += 1

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._count(report)

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped as a whole (xdist hands the controller each such report once)."""
        self._count(report)

    def unexpected(self) -> list[str]:
        return sorted(reason for reason in self.counts if reason not in self.allowed)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.strict and self.unexpected() and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.section("skips (tests/lab/skips.py)")
        if not self.counts:
            terminalreporter.write_line("no test skipped")
        for reason, count in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            verdict = "allowed" if reason in self.allowed else "NOT ALLOWED" if self.strict else "not in the allow-list"
            terminalreporter.write_line(f"{count:5d}  {verdict:<21}  {reason}")
        if self.strict and self.unexpected():
            terminalreporter.write_line(
                f"{len(self.unexpected())} skip reason(s) not in {ALLOW_LIST.name}: the run fails "
                "(install what the test needs, or allow the reason there with why)", red=True)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller counts the reports it forwards
    summary = SkipSummary(allowed_reasons(), strict=os.environ.get(STRICT_ENV) == "1")
    config.pluginmanager.register(summary, "hostcheck-skip-summary")
