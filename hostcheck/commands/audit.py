"""``hostcheck audit`` (collect or read facts, judge them, print the report) and ``hostcheck facts``."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hostcheck.commands.common import (
    DEFAULT_FORMAT,
    FormatName,
    OutputOpt,
    check_output,
    collect_live,
    command_text,
    die,
    emit,
    format_option,
)
from hostcheck.commands.live import (
    DEFAULT_SPEED_MAX_MB,
    LIVE_DEFAULTS,
    LiveOptions,
    SpeedMaxMbOpt,
    SpeedSecondsOpt,
    add_bandwidth,
    live_options,
    speedtest_caps,
)
from hostcheck.earnings.inputs import CONFIG_SHOWN
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_INTERNAL
from hostcheck.netprobe.speedtest import DEFAULT_SECONDS as DEFAULT_SPEED_SECONDS
from hostcheck.recording.store import DEFAULT_DB as DEFAULT_WATCH_DB
from hostcheck.render.formats import Kind

if TYPE_CHECKING:
    from hostcheck.models import Report

RedactOpt = Annotated[bool, typer.Option("--redact", help="Remove IP/MAC addresses, serials, GPU UUIDs, host and user names.")]
AgentSinceOpt = Annotated[str | None, typer.Option(
    "--agent-since", help="Summarise what provider-agent accounts ran through sudo since this ISO 8601 date or time (UTC unless given; default: 7 days ago).")]


def agent_since_epoch(text: str | None) -> float | None:
    """--agent-since as epoch seconds."""
    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise UsageError(f"--agent-since {text!r}: not an ISO 8601 date or time (e.g. 2026-12-01 or 2026-12-01T08:00)") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    epoch = when.timestamp()
    if not 0 < epoch <= time.time():
        raise UsageError(f"--agent-since {text!r}: must lie in the past")
    return epoch


@live_options
def audit(
    policy: Annotated[list[str], typer.Option("--policy", "-p", help="Policy name or YAML file (repeatable); default: all shipped.")] = [],  # noqa: B006
    fmt: Annotated[FormatName, format_option(Kind.AUDIT)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Judge a saved facts snapshot instead of this machine.")] = None,
    redact_output: RedactOpt = False,
    live: LiveOptions = LIVE_DEFAULTS,  # the live-collection options, declared once (live_options)
    strict: Annotated[bool, typer.Option("--strict", help="Exit 3 when any requested policy is not feasible.")] = False,
    accept_owner_risk: Annotated[bool, typer.Option(
        "--accept-owner-risk",
        help="Exit 0 even when the owner risk is high or unknown (you accept what hosting exposes).",
    )] = False,
    verbose: Annotated[bool, typer.Option("--details", "--verbose", "-v", help="After the first screen: every step and cause, and every finding once (passed ones too) with the policies it affects.")] = False,
    speedtest: Annotated[bool, typer.Option("--speedtest", help="Also measure bandwidth against the --probe server (opt-in: bulk traffic, capped by --speedtest-seconds/--speedtest-max-mb).")] = False,
    speedtest_seconds: SpeedSecondsOpt = DEFAULT_SPEED_SECONDS,
    speedtest_max_mb: SpeedMaxMbOpt = DEFAULT_SPEED_MAX_MB,
    watch_db: Annotated[Path | None, typer.Option("--watch-db", help=f"A `hostcheck watch` database to judge uptime from (default {DEFAULT_WATCH_DB} when present).")] = None,
    agent_since: AgentSinceOpt = None,
    price: Annotated[float | None, typer.Option("--price", help="Your price per GPU-hour: the report ends with net per month per feasible platform (see `hostcheck earnings`).")] = None,
    electricity: Annotated[str | None, typer.Option("--electricity", help="Electricity per kWh (0.30) or HH-HH=PRICE,... for those lines.")] = None,
    occupancy: Annotated[float | None, typer.Option("--occupancy", help="Share of hours rented, 0-100 %, for those lines.")] = None,
    earnings_config: Annotated[Path | None, typer.Option("--earnings-config", help=f"Earnings config file (default: {CONFIG_SHOWN} if present).")] = None,
) -> None:
    """Collect facts (or read --facts), judge them against policies, print the report."""
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.render.formats import Options, formats, render
    from hostcheck.render.views import AuditView
    from hostcheck.report import build_report, exit_code

    check_output(output)
    terminal = formats()[fmt].terminal
    policies = resolve_policies(policy)
    if facts_file is not None and speedtest:
        raise UsageError("--speedtest measures this machine's line; it cannot be combined with --facts")
    if facts_file is not None and watch_db is not None:
        raise UsageError("--watch-db adds this machine's recording; it cannot be combined with --facts")
    earnings = _earnings_values(price, electricity, occupancy, earnings_config)  # bad input stops before collecting
    if facts_file is not None:
        facts = load_snapshot(facts_file)
    else:
        ctx = live.context()
        ctx.watch_db = None if watch_db is None else str(watch_db)
        ctx.agent_since = agent_since_epoch(agent_since)
        caps = speedtest_caps(speedtest, live.offline, live.probe, speedtest_seconds, speedtest_max_mb)
        facts = collect_live(ctx, show_progress=terminal and sys.stderr.isatty() and output is None)
        if caps is not None:
            add_bandwidth(facts, ctx, caps)
    report = build_report(facts, policies)
    code = exit_code(report, strict=strict, accept_owner_risk=accept_owner_risk)
    if redact_output:
        from hostcheck.redact import redacted_report

        report, changed = redacted_report(facts, policies, report, servers=[*([live.probe] if live.probe else []), *live.stun_server])
        if changed:
            typer.echo(f"hostcheck: warning: redaction changed the outcome of {', '.join(changed)}; "
                       "judge the unredacted facts for the real verdicts", err=True)
    color = terminal and output is None and sys.stdout.isatty()
    tail = None if earnings is None else _earnings_lines(report, facts, earnings)
    text = render(Kind.AUDIT, AuditView(report, tail), fmt, Options(details=verbose, color=color, command=command_text(redact_output)))
    emit(text, output, private=not redact_output)
    raise typer.Exit(code)


def _earnings_values(price: float | None, electricity: str | None, occupancy: float | None,
                     config: Path | None) -> tuple[dict[str, Any], Path | None] | None:
    """The owner's earnings inputs (flags, the config file), checked before anything is collected:
    a wrong value or file is an InputError (exit 2); a missing one is said in the closing line."""
    from hostcheck.earnings.estimate import audit_values
    from hostcheck.errors import EconomicsDataError

    try:
        return audit_values({"price": price, "electricity": electricity, "occupancy": occupancy}, config)
    except EconomicsDataError as exc:  # a shipped data file that does not load is a bug, not the user's input
        die(str(exc), EXIT_INTERNAL)


def _earnings_lines(report: Report, facts: dict[str, Any], earnings: tuple[dict[str, Any], Path | None]) -> list[str]:
    """The audit's closing earnings lines, when the owner gave prices (flags or the config file)."""
    from hostcheck.earnings.estimate import audit_earnings
    from hostcheck.errors import EarningsMissingError, EconomicsDataError
    from hostcheck.render.earnings.audit import audit_lines, missing_lines

    values, path = earnings
    try:
        return audit_lines(audit_earnings(report, facts, values, path), report.owner_risk.rating)
    except EarningsMissingError as exc:
        return missing_lines(exc)
    except EconomicsDataError as exc:  # a shipped data file that does not load is a bug, not the user's input
        die(str(exc), EXIT_INTERNAL)


@live_options
def facts(
    output: OutputOpt = None,
    redact_output: RedactOpt = False,
    live: LiveOptions = LIVE_DEFAULTS,  # the live-collection options, declared once (live_options)
    agent_since: AgentSinceOpt = None,
    upgrade: Annotated[Path | None, typer.Option(
        "--upgrade", help="Bring this saved facts file (or JSON report) to today's facts format instead of "
        "collecting: what the older format did not record becomes unknown with the reason.")] = None,
) -> None:
    """Print the raw facts as JSON (attach it to a forum post or ticket; judge it later with --facts)."""
    from hostcheck.facts import load_snapshot, to_jsonable
    from hostcheck.safeio import dumps

    check_output(output)
    if upgrade is not None:
        data = to_jsonable(load_snapshot(upgrade))
    else:
        ctx = live.context()
        ctx.agent_since = agent_since_epoch(agent_since)
        data = to_jsonable(collect_live(ctx, show_progress=False))
    if redact_output:
        from hostcheck.redact import Redactor, redact_facts

        redactor = Redactor()
        for server in [*([live.probe] if live.probe else []), *live.stun_server]:
            redactor.learn_server(server)
        data = redact_facts(data, redactor)
    emit(dumps(data, indent=2) + "\n", output, private=not redact_output)
