"""The metrics as a text file for node_exporter's textfile collector (`hostcheck watch --textfile DIR`).

The collector reads every ``*.prom`` file in its directory at each scrape. Its documentation
asks for atomic writes: the text goes to a temporary file in the same directory (whose name
does not end in ``.prom``, so the collector never reads it half-written), then is renamed over
``hostcheck_watch.prom``. The format is Prometheus's text exposition format 0.0.4, the one the
collector parses.

A directory that is missing or not writable is said once when the recorder starts; the
recording goes on without the file, and a write that fails later is said once until one works
again.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hostcheck.recording.analysis import analyse
from hostcheck.recording.store import Sample, WatchWriter, read_recording
from hostcheck.watch.follow import EventTail
from hostcheck.watch.metrics import WINDOWS, Family, MetricsState, families, window_of
from hostcheck.watch.rules import score_all

FILE_NAME = "hostcheck_watch.prom"
ALERT_RULES = Path(__file__).with_name("prometheus_alerts.yaml")
REFRESH_S = 3600.0
"""The window gauges and platform scores are recomputed from the recording at the first sample,
whenever the live state changes, and at least this often (bench/watch.py measures the cost)."""


def _escape_label(value: str) -> str:
    # The text format's label value escapes: backslash, double quote, line feed.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value) if not value.is_integer() or abs(value) >= 1e15 else str(int(value))


def exposition(fams: list[Family]) -> str:
    """The families in the text exposition format."""
    lines: list[str] = []
    for fam in fams:
        meta = fam.meta
        lines.append(f"# HELP {meta.name} {_escape_help(meta.help)}")
        lines.append(f"# TYPE {meta.name} {meta.type}")
        for labels, value in fam.samples:
            body = ",".join(f'{key}="{_escape_label(labels[key])}"' for key in meta.labels)
            lines.append(f"{meta.name}{{{body}}} {_value(value)}" if body else f"{meta.name} {_value(value)}")
    return "\n".join(lines) + "\n"


def directory_problem(directory: Path) -> str | None:
    """Why the metrics cannot be written into ``directory`` (None: they can)."""
    if not directory.exists():
        return f"--textfile {directory}: no such directory (node_exporter's --collector.textfile.directory)"
    if not directory.is_dir():
        return f"--textfile {directory}: not a directory"
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{FILE_NAME}.")
    except OSError as exc:
        return f"--textfile {directory}: cannot write there ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(tmp)
    return None


def write_atomically(directory: Path, text: str) -> None:
    """Write ``text`` to DIR/hostcheck_watch.prom through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{FILE_NAME}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # node_exporter runs as its own account
        os.replace(tmp, directory / FILE_NAME)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class TextfileOutput:
    """The recorder's hook: after each sample, bring the metrics up to date and write the file."""

    def __init__(self, directory: Path, db: Path, interval_s: float, log: Callable[[str], None], *,
                 addresses: bool = False, refresh_s: float = REFRESH_S, clock: Callable[[], float] = time.time):
        self.directory = directory
        self.db = db
        self.addresses = addresses
        self.refresh_s = refresh_s
        self.log = log
        self.clock = clock
        self.state = MetricsState(started_at=clock(), interval_s=interval_s)
        self.events = EventTail()
        self.failing: str | None = None
        self.next_refresh = 0.0
        problem = directory_problem(directory)
        if problem:
            log(f"{problem}; recording goes on without the metrics file")
            self.failing = problem

    def refresh(self) -> None:
        now = self.clock()
        recording = read_recording(self.db, since=now - max(WINDOWS.values()))
        analysis = analyse(recording)
        self.state.set_window(window_of(analysis, score_all(analysis), now))
        self.next_refresh = now + self.refresh_s

    def close(self) -> None:
        """The file stays: its last-sample time is how Prometheus sees that the recorder stopped."""

    def after_sample(self, writer: WatchWriter, sample: Sample) -> None:
        self.state.add_events(self.events.read(writer.conn), sample.t)
        before = self.state.last_state
        state = self.state.add_sample(sample)
        if state != before or self.clock() >= self.next_refresh:
            try:
                self.refresh()
            except Exception as exc:  # the file goes on with the last window; the recording too
                self.log(f"metrics: the window could not be computed: {type(exc).__name__}: {exc}")
                self.next_refresh = self.clock() + self.refresh_s
        try:
            write_atomically(self.directory, exposition(families(self.state, addresses=self.addresses)))
        except OSError as exc:
            if self.failing is None:  # said once, until a write works again
                self.log(f"--textfile {self.directory}: cannot write {FILE_NAME} ({exc.strerror or exc}); recording goes on")
            self.failing = str(exc)
            return
        if self.failing is not None:
            self.log(f"--textfile {self.directory}: {FILE_NAME} written again")
            self.failing = None
