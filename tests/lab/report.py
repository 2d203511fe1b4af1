"""The end-of-run report: where the time went (cache builds cold or warm, lab boots, fixture
steps, each module), printed after pytest's summary. Works with and without pytest-xdist: the
workers' cache/boot/step records arrive through the file in ``HOSTCHECK_LAB_TIMINGS``
(tests/lab/timing.py), the modules' times through the test reports the controller receives.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.lab import timing


class PhaseReport:
    def __init__(self, path: Path, own_file: bool) -> None:
        self.path = path
        self.own_file = own_file
        self.started = time.monotonic()
        self.modules: dict[str, float] = defaultdict(float)
        self.spans: dict[str, list[float]] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = report.nodeid.split("::", 1)[0].split("@", 1)[0]
        self.modules[module] += report.duration
        start, stop = getattr(report, "start", None), getattr(report, "stop", None)
        if start is not None and stop is not None:
            span = self.spans.setdefault(module, [start, stop])
            span[0], span[1] = min(span[0], start), max(span[1], stop)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        entries = timing.read(self.path)
        write = terminalreporter.write_line
        terminalreporter.section("where the time went (tests/lab/report.py)")
        cache = [e for e in entries if e["kind"] == "cache"]
        seen: dict[str, dict[str, Any]] = {}
        for e in cache:  # one line per artifact: the call that built it, else the first use
            if e["name"] not in seen or e.get("state") != "warm":
                seen[e["name"]] = e
        for name, e in sorted(seen.items()):
            write(f"cache build  {name:<28} {e['state']:<10} {e['seconds']:8.1f} s")
        if not cache:
            write("cache build  (no lab cache used)")
        boots = [e for e in entries if e["kind"] == "boot"]
        by_kind: dict[str, list[float]] = defaultdict(list)
        for e in boots:
            by_kind[e["name"].split()[0]].append(e["seconds"])
        for kind, values in sorted(by_kind.items()):
            write(f"lab boot     {kind:<28} {len(values):3d} starts {sum(values):8.1f} s (max {max(values):.1f} s)")
        steps = sorted((e for e in entries if e["kind"] == "step"), key=lambda e: -e["seconds"])
        for e in steps[:15]:
            write(f"step         {e['name'][:60]:<60} {e['seconds']:7.1f} s of {e.get('budget', 0):.0f} s")
        for module, seconds in sorted(self.modules.items(), key=lambda kv: -kv[1]):
            span = self.spans.get(module)
            wall = f" (wall {span[1] - span[0]:.1f} s)" if span else ""
            if seconds >= 1.0:
                write(f"module       {module:<60} {seconds:7.1f} s{wall}")
        write(f"pytest       session wall time {time.monotonic() - self.started:.1f} s")

    def close(self) -> None:
        if self.own_file:
            self.path.unlink(missing_ok=True)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: it writes records, the controller reports
    path = os.environ.get(timing.ENV)
    own = not path
    if own:
        fd, path = tempfile.mkstemp(prefix="hostcheck-timings-", suffix=".jsonl")
        os.close(fd)
        os.environ[timing.ENV] = path  # inherited by xdist workers, started after this
    report = PhaseReport(Path(path), own)
    config.pluginmanager.register(report, "hostcheck-phase-report")
    config.add_cleanup(report.close)
