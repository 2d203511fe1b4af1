"""``hostcheck fleet``: one table across many hosts' reports (``hostcheck fleet DIR...``, short for
``hostcheck fleet table DIR...``) and drift between two audits (``hostcheck fleet diff OLD NEW``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from hostcheck.commands.common import (
    DEFAULT_FORMAT,
    FormatName,
    OutputOpt,
    check_output,
    command_text,
    emit,
    format_option,
)
from hostcheck.errors import FleetError
from hostcheck.fleet.reports import (
    HostEntry,
    diff_fleets,
    errors,
    fleet_source,
    load_fleet,
    read_table,
    redact_entries,
    sort_rows,
)
from hostcheck.render.formats import Kind, Options, render
from hostcheck.render.views import FleetDriftView, FleetView, FleetWatchView

TABLE_COMMAND = "table"


class FleetSort(StrEnum):
    """The order of the hosts in the table, after the failing ones."""

    HOST = "host"
    SCORE = "score"
    VRAM = "vram"


class TableByDefault(TyperGroup):
    """Arguments that do not start with a sub-command's name are the table's:
    ``hostcheck fleet -p vast DIR`` runs ``hostcheck fleet table -p vast DIR``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = [TABLE_COMMAND, *args]
        return super().parse_args(ctx, args)


fleet_app = typer.Typer(
    cls=TableByDefault,
    add_completion=False,
    rich_markup_mode=None,
    subcommand_metavar="[table] DIR... | diff OLD_DIR NEW_DIR | watch DIR...",
    help="One table across many hosts' reports (`hostcheck fleet DIR...`, short for `hostcheck fleet table "
    "DIR...`), drift between two audits (`hostcheck fleet diff OLD_DIR NEW_DIR`), or every host's "
    "reliability rehearsal side by side (`hostcheck fleet watch DIR...`).",
)

RedactOpt = Annotated[bool, typer.Option("--redact", help="Replace host names (the host column too), addresses and user names, as `audit --redact` does.")]


@fleet_app.command(TABLE_COMMAND)
def table(
    paths: Annotated[list[Path], typer.Argument(metavar="DIR", help="Report directories (or report files).")],
    policy: Annotated[list[str], typer.Option("--policy", "-p", help="Policies to show (repeatable); the first sorts failing hosts first.")] = [],  # noqa: B006
    sort: Annotated[FleetSort, typer.Option("--sort", help="Order after the failing hosts.")] = FleetSort.HOST,
    fmt: Annotated[FormatName, format_option(Kind.FLEET)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    redact_output: RedactOpt = False,
) -> None:
    """One table across many hosts' reports.

    A row per host with its verdict and score per policy. Unreachable hosts come first; with
    --policy, then those that fail the first policy named; then the order of --sort."""
    check_output(output)
    redactor = None
    if redact_output:
        from hostcheck.redact import Redactor

        redactor = Redactor()
    with _report_names_redacted(paths, redact_output):
        source = fleet_source(paths)
    fleet = read_table(source, list(policy), redactor)
    ids = fleet.policy_ids
    rows = sort_rows(fleet.rows, ids[0] if policy else None, sort)
    emit(render(Kind.FLEET, FleetView(rows, ids), fmt, Options(command=command_text(redact_output))), output, private=not redact_output)
    _refuse(fleet.problems)


@fleet_app.command("diff")
def diff(
    old: Annotated[Path, typer.Argument(metavar="OLD_DIR", help="The earlier audit's report directory.")],
    new: Annotated[Path, typer.Argument(metavar="NEW_DIR", help="The later audit's report directory.")],
    fmt: Annotated[FormatName, format_option(Kind.FLEET_DRIFT)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    redact_output: RedactOpt = False,
) -> None:
    """Drift between two audits.

    Per host: verdicts that flipped, findings that regressed or improved, owner-risk changes,
    sockets newly listening or closed; hosts added, removed, or reachable no more or again."""
    check_output(output)
    with _report_names_redacted([old, new], redact_output):
        before, after = load_fleet([old]), load_fleet([new])
    if redact_output:
        redact_entries(before + after)
    changes = diff_fleets(before, after)
    emit(render(Kind.FLEET_DRIFT, FleetDriftView(changes), fmt), output, private=not redact_output)
    _refuse_bad_reports(before + after)


@fleet_app.command("watch")
def watch(
    paths: Annotated[list[Path], typer.Argument(metavar="DIR", help="Directories of <host>.watch.json files (playbooks/watch-report.yml).")],
    fmt: Annotated[FormatName, format_option(Kind.FLEET_WATCH)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    redact_output: RedactOpt = False,
) -> None:
    """Every host's reliability rehearsal side by side, worst first.

    Uptime, outages by cause, and each platform rule's verdict, from each host's
    `hostcheck watch report`; hosts without one first, then the most rules below, the lowest uptime."""
    from hostcheck.fleet.watch import read_rows, worst_first

    check_output(output)
    with _report_names_redacted(paths, redact_output):
        rows, problems = read_rows(paths)
    if redact_output:
        from hostcheck.redact import Redactor

        redactor = Redactor()
        for row in rows:
            redactor.learn_host(row.host, own=True)
        for row in rows:
            row.host = redactor.host(row.host)
            row.reason = None if row.reason is None else redactor.scrub(row.reason)
        problems = [redactor.scrub(p) for p in problems]
    rows = worst_first(rows)
    emit(render(Kind.FLEET_WATCH, FleetWatchView(rows), fmt), output, private=not redact_output)
    _refuse(problems)


def _refuse_bad_reports(entries: list[HostEntry]) -> None:
    _refuse(errors(entries))


def _refuse(problems: list[str]) -> None:
    """The view is complete for every other host; the exit code still says input was bad."""
    if problems:
        raise FleetError(f"{len(problems)} report(s) could not be used (their rows say why): {'; '.join(problems)}")


@contextmanager
def _report_names_redacted(paths: list[Path], redact: bool) -> Iterator[None]:
    """With --redact, a fleet error about reports not read yet names no host: the host names
    are those of the report files, replaced as the table replaces them."""
    try:
        yield
    except FleetError as exc:
        if not redact:
            raise
        from hostcheck.redact import Redactor

        redactor = Redactor()
        for path in paths:
            try:
                reports = sorted(path.glob("*.json"))[:10000] if path.is_dir() else [path]
            except OSError:
                reports = [path]
            for report in reports:
                if report.name != "index.json":
                    redactor.learn_host(report.stem, own=True)
        raise FleetError(redactor.scrub(str(exc))) from None
