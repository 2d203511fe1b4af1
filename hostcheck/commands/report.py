"""``hostcheck report``: the audit, the earnings and the watch report in one HTML file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from hostcheck.commands.common import check_output, command_text, emit

RedactOpt = Annotated[bool, typer.Option("--redact", help="Remove IP/MAC addresses, serials, GPU UUIDs, host and user names.")]


def report(
    facts_file: Annotated[Path, typer.Option("--facts", help="The facts snapshot to judge (`hostcheck facts -o FILE`).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write ('-': stdout). A regular file is replaced atomically; anything else but a device or FIFO is refused.")],
    watch_db: Annotated[Path | None, typer.Option("--watch-db", help="A `hostcheck watch` database: adds the reliability rehearsal.")] = None,
    earnings_config: Annotated[Path | None, typer.Option("--earnings-config", help="An earnings config file (see `hostcheck earnings --help`): adds net money per platform.")] = None,
    policy: Annotated[list[str], typer.Option("--policy", "-p", help="Policy name or YAML file (repeatable); default: all shipped.")] = [],  # noqa: B006
    redact_output: RedactOpt = False,
) -> None:
    """One self-contained HTML file to look at and to share: the audit of --facts, with the
    earnings (--earnings-config) and the reliability rehearsal (--watch-db) when given, and the
    offer a Vast renter would see. No script, nothing loaded from anywhere: it opens offline."""
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.render.html import render_combined
    from hostcheck.report import build_report

    check_output(output)
    policies = resolve_policies(policy)
    earnings_values = _earnings_values(earnings_config)
    facts = load_snapshot(facts_file)
    audit = build_report(facts, policies)
    if redact_output:
        from hostcheck.redact import redact_facts, redacted_report

        audit, changed = redacted_report(facts, policies, audit, servers=[])
        if changed:
            typer.echo(f"hostcheck: warning: redaction changed the outcome of {', '.join(changed)}; "
                       "judge the unredacted facts for the real verdicts", err=True)
        facts = redact_facts(facts)
    earnings = None if earnings_values is None else _earnings(audit, facts, earnings_values)
    watch = None if watch_db is None else _watch(watch_db)
    text = render_combined(audit, earnings=earnings, watch=watch, offer=_offer(facts),
                           command=command_text(redact_output))
    emit(text, output, private=not redact_output)


def _earnings_values(config: Path | None) -> tuple[dict[str, Any], Path | None] | None:
    from hostcheck.earnings.estimate import merged_values

    if config is None:
        return None
    return merged_values({}, config)  # a wrong file is an InputError (exit 2), before any work


def _earnings(audit: Any, facts: dict[str, Any], values: tuple[dict[str, Any], Path | None]) -> list[Any] | str:
    """The earnings section, or the sentence that says which input is missing."""
    from hostcheck.earnings.estimate import audit_earnings
    from hostcheck.errors import EarningsMissingError
    from hostcheck.render.earnings.html import earnings_body

    try:
        return earnings_body(audit_earnings(audit, facts, *values))
    except EarningsMissingError as exc:
        return f"Earnings not estimated: {exc}"


def _watch(db: Path) -> Any:
    from hostcheck.recording.analysis import analyse
    from hostcheck.recording.store import read_recording
    from hostcheck.watch.rules import score_all

    analysis = analyse(read_recording(db), now=time.time())
    return analysis, score_all(analysis), str(db)


def _offer(facts: dict[str, Any]) -> Any:
    from hostcheck.measure.offer import build_offer
    from hostcheck.measure.power_estimate import estimate_power

    return build_offer(facts, power=estimate_power(facts),
                       disk_hint="judging a snapshot (--facts); run `hostcheck offer` on the machine")
