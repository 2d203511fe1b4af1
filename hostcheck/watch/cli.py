"""`hostcheck watch` (record) and `hostcheck watch report` (read). Option parsing only."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Annotated

import typer

from hostcheck.cli_common import FormatOpt, OutputFormat, OutputOpt, UsageError, emit
from hostcheck.exit_codes import EXIT_OK
from hostcheck.watch.probes import DEFAULT_TARGETS, DEFAULT_TIMEOUT_S
from hostcheck.watch.recorder import DEFAULT_INTERVAL_S, MAX_INTERVAL_S, MIN_INTERVAL_S, Recorder, WatchConfig
from hostcheck.watch.store import DEFAULT_DB, DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_BYTES

DURATION_RE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhd]?)$")
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MIB = 1024 * 1024
MIN_PROBE_TIMEOUT_S = 0.1
MAX_PROBE_TIMEOUT_S = 10.0

watch_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    invoke_without_command=True,
    help="Record a reliability rehearsal (network, boots, GPU health, package changes) into an "
    "SQLite database; `hostcheck watch report` shows what a platform would see.",
)


def parse_duration(text: str) -> float:
    m = DURATION_RE.match(text.strip())
    if not m:
        raise UsageError(f"{text!r} is not a duration (e.g. 90, 30m, 12h, 7d)")
    value = float(m.group("n")) * UNITS[m.group("unit")]
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{text!r} must be above zero")
    return value


DbOpt = Annotated[Path, typer.Option("--db", help="The watch database (SQLite).")]


@watch_app.callback()
def record(
    ctx: typer.Context,
    db: DbOpt = DEFAULT_DB,
    interval: Annotated[float, typer.Option("--interval", help=f"Seconds between samples ({MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}).")] = DEFAULT_INTERVAL_S,
    duration: Annotated[str | None, typer.Option("--for", help="Stop after this long (90, 30m, 12h, 7d); default: until stopped.")] = None,
    target: Annotated[list[str], typer.Option("--target", help="tcp:HOST:PORT or dns:SERVER[:PORT] (repeatable); default: " + ", ".join(DEFAULT_TARGETS) + ".")] = [],  # noqa: B006
    stun_server: Annotated[list[str], typer.Option("--stun-server", help="STUN server HOST[:PORT] for the public address (repeatable; none by default).")] = [],  # noqa: B006
    probe_timeout: Annotated[float, typer.Option("--probe-timeout", help=f"Seconds each network probe may take ({MIN_PROBE_TIMEOUT_S:g}-{MAX_PROBE_TIMEOUT_S:g}).")] = DEFAULT_TIMEOUT_S,
    journal_file: Annotated[list[Path], typer.Option("--journal-file", help="Read this journal file instead of the system journal (repeatable).")] = [],  # noqa: B006
    max_age_days: Annotated[float, typer.Option("--max-age-days", help="Drop samples older than this.")] = DEFAULT_MAX_AGE_DAYS,
    max_mb: Annotated[float, typer.Option("--max-mb", help="Keep the database under this many MiB (oldest samples go first).")] = DEFAULT_MAX_BYTES / MIB,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    seconds = None if duration is None else parse_duration(duration)
    if not (math.isfinite(probe_timeout) and MIN_PROBE_TIMEOUT_S <= probe_timeout <= MAX_PROBE_TIMEOUT_S):
        raise UsageError(f"--probe-timeout must be {MIN_PROBE_TIMEOUT_S:g}-{MAX_PROBE_TIMEOUT_S:g} seconds")
    if not (math.isfinite(max_age_days) and max_age_days > 0 and math.isfinite(max_mb) and max_mb >= 1):
        raise UsageError("--max-age-days must be above 0 and --max-mb at least 1")
    command = None
    if journal_file:
        command = ["journalctl", *[arg for f in journal_file for arg in ("--file", str(f))]]
    config = WatchConfig(
        db=db, interval_s=interval, duration_s=seconds, targets=list(target) or list(DEFAULT_TARGETS),
        stun_servers=list(stun_server), journal_command=command, probe_timeout_s=probe_timeout, max_age_days=max_age_days,
        max_bytes=int(max_mb * MIB),
    )  # fmt: skip
    recorder = Recorder(config)
    recorder.install_signal_handlers()
    typer.echo(f"hostcheck watch: recording into {db} every {interval:g}s; stop with Ctrl-C", err=True)
    written = recorder.run()
    typer.echo(f"hostcheck watch: {written} samples written ({recorder.stop_reason})", err=True)
    raise typer.Exit(EXIT_OK)


@watch_app.command("report")
def report(
    db: DbOpt = DEFAULT_DB,
    fmt: FormatOpt = OutputFormat.TABLE,
    days: Annotated[float | None, typer.Option("--days", help="Only the last N days.")] = None,
    output: OutputOpt = None,
) -> None:
    """Uptime, outages with causes, a timeline, and each platform's published rule applied."""
    from hostcheck.watch.analysis import analyse
    from hostcheck.watch.render import render
    from hostcheck.watch.rules import score_all
    from hostcheck.watch.store import read_recording

    if days is not None and not (math.isfinite(days) and days > 0):
        raise UsageError("--days must be above 0")
    recording = read_recording(db, since=None if days is None else time.time() - days * 86400)
    analysis = analyse(recording)
    text = render(analysis, score_all(analysis), str(db), fmt)
    emit(text, output)
