"""`hostcheck watch` (record) and `hostcheck watch report` (read). Option parsing only."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Annotated

import typer

from hostcheck.commands.common import DEFAULT_FORMAT, FormatName, OutputOpt, command_text, emit, format_option
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_OK
from hostcheck.recording.store import (
    DEFAULT_DB,
    DEFAULT_MAX_AGE_DAYS,
    DEFAULT_MAX_BYTES,
    USER_DB_SHOWN,
    default_record_db,
    default_report_db,
)
from hostcheck.render.formats import Kind
from hostcheck.watch import traffic
from hostcheck.watch.probes import DEFAULT_TARGETS, DEFAULT_TIMEOUT_S, parse_targets
from hostcheck.watch.recorder import (
    DEFAULT_INTERVAL_S,
    MAX_INTERVAL_S,
    MAX_PROBE_PORTS,
    MIN_INTERVAL_S,
    MIN_PROBE_EVERY_S,
    Recorder,
    WatchConfig,
)
from hostcheck.wording import counted

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


def parse_probe_port(text: str) -> tuple[int, str]:
    """``PORT``, ``PORT/tcp`` or ``PORT/udp``."""
    number, _, proto = text.strip().partition("/")
    proto = proto or "tcp"
    if not number.isdigit() or not 1 <= int(number) <= 65535 or proto not in ("tcp", "udp"):
        raise UsageError(f"--probe-port {text!r}: a port is PORT, PORT/tcp or PORT/udp (1-65535)")
    return int(number), proto


DbOpt = Annotated[Path | None, typer.Option("--db", help=f"The watch database (SQLite); default: {DEFAULT_DB}, or {USER_DB_SHOWN} where this user cannot write that one.", show_default=False)]


@watch_app.callback()
def record(
    ctx: typer.Context,
    db: DbOpt = None,
    interval: Annotated[float, typer.Option("--interval", help=f"Seconds between samples ({MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}).")] = DEFAULT_INTERVAL_S,
    duration: Annotated[str | None, typer.Option("--for", help="Stop after this long (90, 30m, 12h, 7d); default: until stopped.")] = None,
    target: Annotated[list[str], typer.Option("--target", help="tcp:HOST:PORT or dns:SERVER[:PORT] (repeatable); default: " + ", ".join(DEFAULT_TARGETS) + ".")] = [],  # noqa: B006
    stun_server: Annotated[list[str], typer.Option("--stun-server", help="STUN server HOST[:PORT] for the public address (repeatable; none by default).")] = [],  # noqa: B006
    probe_timeout: Annotated[float, typer.Option("--probe-timeout", help=f"Seconds each network probe may take ({MIN_PROBE_TIMEOUT_S:g}-{MAX_PROBE_TIMEOUT_S:g}).")] = DEFAULT_TIMEOUT_S,
    journal_file: Annotated[list[Path], typer.Option("--journal-file", help="Read this journal file instead of the system journal (repeatable).")] = [],  # noqa: B006
    max_age_days: Annotated[float, typer.Option("--max-age-days", help="Drop samples older than this (measured on the boot clocks: a clock step never makes a sample look old).")] = DEFAULT_MAX_AGE_DAYS,
    max_mb: Annotated[float, typer.Option("--max-mb", help="Keep the database under this many MiB (oldest samples go first).")] = DEFAULT_MAX_BYTES / MIB,
    probe: Annotated[str | None, typer.Option("--probe", help="Your probe server's URL: check the forwarded ports from outside (opt-in).")] = None,
    probe_fingerprint: Annotated[str | None, typer.Option("--probe-fingerprint", help="SHA-256 fingerprint of the probe server's certificate.")] = None,
    token_file: Annotated[Path | None, typer.Option("--token-file", help="File holding the probe token (or HOSTCHECK_PROBE_TOKEN).")] = None,
    probe_port: Annotated[list[str], typer.Option("--probe-port", help=f"A forwarded port to check: PORT, PORT/tcp or PORT/udp (repeatable, at most {MAX_PROBE_PORTS}).")] = [],  # noqa: B006
    drift_every: Annotated[str, typer.Option("--drift-every", help="How often to read what changes rarely: the LAN address, gateway and link, the NVIDIA driver's parts, a pending reboot, agent restarts (at least 1s).")] = "5m",
    probe_every: Annotated[str, typer.Option("--probe-every", help=f"How often to check the forwarded ports (at least {MIN_PROBE_EVERY_S / 60:g}m).")] = "60m",
    insecure_http: Annotated[bool, typer.Option("--insecure-http", help="Allow an http:// probe or notification URL (labs only: the token goes in clear).")] = False,
    allow_more_traffic: Annotated[bool, typer.Option("--allow-more-traffic", help=f"Start even when the settings send more than {traffic.LIMIT_BYTES_PER_MIN // 1024} KiB a minute.")] = False,
    textfile: Annotated[Path | None, typer.Option("--textfile", help="Write Prometheus metrics into this directory after every sample (node_exporter's textfile collector directory).")] = None,
    textfile_address: Annotated[bool, typer.Option("--textfile-address", help="Put the public address (STUN) into the metrics as a label.")] = False,
    notify_kuma_file: Annotated[Path | None, typer.Option("--notify-kuma-file", help="File (mode 0600) holding an Uptime Kuma push URL: told of outages, GPU faults and restarts.")] = None,
    notify_webhook_file: Annotated[Path | None, typer.Option("--notify-webhook-file", help="File (mode 0600) holding a webhook URL: the same, as JSON (docs/watch.md).")] = None,
    redact: Annotated[bool, typer.Option("--redact", help="No address in the metrics or notifications, whatever else is asked.")] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    seconds = None if duration is None else parse_duration(duration)
    targets = list(target) or list(DEFAULT_TARGETS)
    ports = [parse_probe_port(p) for p in probe_port]
    every_s = parse_duration(probe_every)
    drift_every_s = parse_duration(drift_every)
    token = None
    if probe is not None:
        from hostcheck.commands.live import probe_endpoint, read_token, refuse_cleartext

        refuse_cleartext(probe_endpoint(probe, probe_fingerprint), insecure_http)
        token = read_token(token_file)
        if not token:
            raise UsageError("--probe needs the probe server's token: --token-file FILE or HOSTCHECK_PROBE_TOKEN")
        if every_s < MIN_PROBE_EVERY_S:
            raise UsageError(f"--probe-every must be at least {MIN_PROBE_EVERY_S / 60:g} minutes")
    elif probe_port:
        raise UsageError("--probe-port needs --probe (the probe server that checks the ports from outside)")
    if not (math.isfinite(interval) and interval > 0):
        raise UsageError(f"--interval must be {MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g} seconds")
    per_minute = traffic.bytes_per_minute(interval, parse_targets(targets), len(stun_server),
                                          probe_ports=len(ports) if probe else 0, probe_every_s=every_s)
    refusal = traffic.check(per_minute, allow_more_traffic)
    if refusal is not None:
        raise UsageError(refusal)
    if not (math.isfinite(probe_timeout) and MIN_PROBE_TIMEOUT_S <= probe_timeout <= MAX_PROBE_TIMEOUT_S):
        raise UsageError(f"--probe-timeout must be {MIN_PROBE_TIMEOUT_S:g}-{MAX_PROBE_TIMEOUT_S:g} seconds")
    if not (math.isfinite(max_age_days) and max_age_days > 0 and math.isfinite(max_mb) and max_mb >= 1):
        raise UsageError("--max-age-days must be above 0 and --max-mb at least 1")
    if seconds is not None and seconds < interval:
        # One sample says nothing about uptime: a watch shorter than its interval would write one and stop.
        raise UsageError(f"--for {duration} is shorter than the interval ({interval:g} s), so it would record one "
                         f"sample only: give --for at least {interval:g}s or a shorter --interval")
    said = None
    if db is None:
        db, said = default_record_db()
    command = None
    if journal_file:
        command = ["journalctl", *[arg for f in journal_file for arg in ("--file", str(f))]]
    config = WatchConfig(
        db=db, interval_s=interval, duration_s=seconds, targets=targets,
        stun_servers=list(stun_server), journal_command=command, probe_timeout_s=probe_timeout, max_age_days=max_age_days,
        max_bytes=int(max_mb * MIB), probe_url=probe, probe_token=token, probe_fingerprint=probe_fingerprint,
        probe_ports=ports, probe_every_s=every_s, drift_every_s=drift_every_s,
    )  # fmt: skip
    if notify_kuma_file is not None or notify_webhook_file is not None:
        from hostcheck.watch.notify import Notifier, destinations_from, host_name

        destinations = destinations_from(notify_kuma_file, notify_webhook_file, insecure_http)
        if insecure_http and any(d.url.scheme == "http" for d in destinations):
            _say("warning: --insecure-http: a notification URL is http://; its token goes in clear (labs only)")
        config.hooks.append(Notifier(destinations, host=host_name(redact)))
    if textfile is not None:
        from hostcheck.watch.textfile import TextfileOutput

        config.hooks.append(TextfileOutput(textfile, db, interval, _say, addresses=textfile_address and not redact))
    recorder = Recorder(config)
    recorder.install_signal_handlers()
    if said:
        typer.echo(f"hostcheck watch: {said}", err=True)
    typer.echo(f"hostcheck watch: recording into {db} every {interval:g}s (about {per_minute / 1024:.1f} KiB a minute "
               "on the network); stop with Ctrl-C", err=True)
    written = recorder.run()
    typer.echo(f"hostcheck watch: {counted(written, 'sample')} written ({recorder.stop_reason})", err=True)
    raise typer.Exit(EXIT_OK)


@watch_app.command("alert-rules")
def alert_rules() -> None:
    """Print the Prometheus alerting rules for the --textfile metrics (for prometheus.yml's rule_files)."""
    from hostcheck.watch.textfile import ALERT_RULES

    typer.echo(ALERT_RULES.read_text(encoding="utf-8"), nl=False)


def _say(message: str) -> None:
    typer.echo(f"hostcheck watch: {message}", err=True)


@watch_app.command("report")
def report(
    db: DbOpt = None,
    fmt: Annotated[FormatName, format_option(Kind.WATCH)] = DEFAULT_FORMAT,
    days: Annotated[float | None, typer.Option("--days", help="Only the last N days.")] = None,
    output: OutputOpt = None,
    details: Annotated[bool, typer.Option("--details", help="Also each rule's text and sources, every day, the timeline, every outage, GPU health and the events.")] = False,
) -> None:
    """Uptime, outages with causes, a timeline, and each platform's published rule applied."""
    from hostcheck.recording.analysis import analyse
    from hostcheck.recording.store import read_recording
    from hostcheck.render.formats import Options, render
    from hostcheck.render.views import WatchView
    from hostcheck.watch.rules import score_all

    if days is not None and not (math.isfinite(days) and days > 0):
        raise UsageError("--days must be above 0")
    db = db if db is not None else default_report_db()
    recording = read_recording(db, since=None if days is None else time.time() - days * 86400)
    analysis = analyse(recording, now=time.time())
    text = render(Kind.WATCH, WatchView(analysis, score_all(analysis), str(db)), fmt, Options(details=details, command=command_text()))
    emit(text, output)
