"""What every command shares: the --format option (the formats are hostcheck.render.formats), usage errors, the error exit,
writing the result, live collection.

Kept apart from ``hostcheck.cli`` (the root) so that the command modules need not import it;
light, since every command imports it.
"""

from __future__ import annotations

import math
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_USAGE
from hostcheck.render.formats import DEFAULT, Kind, declined, formats

MAX_TIMEOUT_S = 3600.0
"""Longest --timeout for collecting facts (an hour: any longer is a typo)."""


if TYPE_CHECKING:
    FormatName = str
else:  # --format's choices: the registered formats (hostcheck.render.formats), the default first
    FormatName = StrEnum("FormatName", {name.upper(): name for name in formats()})
DEFAULT_FORMAT: FormatName = FormatName(DEFAULT)


def format_option(kind: Kind, help: str = "How to print the report.") -> Any:
    """``--format``/``-f`` for a command that prints a report of ``kind``: its help names the
    formats that render it, with what each is for; one that does not is refused as the option's
    value, before any work."""

    def renders(value: str) -> str:
        if not formats()[value].renders(kind):
            raise typer.BadParameter(declined(value, kind))
        return value

    offered = ", ".join(f"{name} ({fmt.help})" for name, fmt in formats().items() if fmt.renders(kind))
    return typer.Option("--format", "-f", help=f"{help.rstrip('.')}: {offered}.", callback=renders)


OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout ('-': stdout). A regular file is replaced atomically; a device or FIFO is written through; anything else is refused.")]


def command_text(redact: bool = False) -> str:
    """The command line as given, for a report's header: the command, then each option set to
    other than its default (with --redact, file and directory names are left out)."""
    import importlib

    try:  # typer carries its own click; its context is where the options as parsed are
        ctx = importlib.import_module("typer._click.globals").get_current_context(silent=True)
    except (ImportError, AttributeError):
        ctx = None
    if ctx is None:
        return "hostcheck"
    names = []
    link = ctx
    while link.parent is not None:  # the root's own name is however Python was started
        names.append(link.info_name or "")
        link = link.parent
    words = ["hostcheck", *reversed(names)]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value is None or value == param.default or value in ([], (), False):
            continue
        name = param.opts[0] if param.param_type_name == "option" else ""
        values = value if isinstance(value, (list, tuple)) else [value]
        for one in values:
            shown = "…" if redact and isinstance(one, Path) else str(one)
            words += [name] if one is True else ([name, shown] if name else [shown])
    return " ".join(words)


def die(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Each line of ``message`` (a policy's errors are one per line) as its own error line, escaped."""
    from hostcheck.render.escape import escape_text

    for line in message.split("\n"):
        typer.echo(f"hostcheck: error: {escape_text(line)}", err=True)
    raise typer.Exit(code)


def check_timeout(timeout: float) -> None:
    """Refuse a --timeout (the budget for collecting facts) that is not above 0 and at most MAX_TIMEOUT_S."""
    if not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise UsageError(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, not {timeout}")


def check_output(output: Path | None) -> None:
    """Refuse an output path that will never be written before spending time on the work: every
    command with ``--output`` calls this first, before it reads or computes anything."""
    if output is None:
        return
    from hostcheck.errors import OutputRefused
    from hostcheck.safeio import plan_output

    try:
        plan_output(output)
    except OutputRefused as exc:
        raise UsageError(f"--output {output}: {exc.strerror}") from None


def emit(text: str, output: Path | None, private: bool = True) -> None:
    """Write to --output, or stdout. If the file cannot be written, the report still reaches stdout.

    A regular file (or a new path) is replaced atomically, a device or FIFO is written
    through, anything else is refused (hostcheck.safeio.plan_output has the rule); ``private``
    (anything not redacted) makes a new file readable by its owner only.
    """
    if output is None:
        sys.stdout.write(text)
        return
    from hostcheck.render.escape import escape_text
    from hostcheck.safeio import write_output

    try:
        plan = write_output(output, text, private=private)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if str(output) == "-":
            die(f"cannot write to standard output: {reason}")
        sys.stdout.write(text)
        die(f"cannot write {output}: {reason}; the report was printed to stdout instead")
    if plan.how != "stdout":
        shown = escape_text(str(output))
        typer.echo(f"hostcheck: wrote {shown}" + ("" if plan.how == "atomic" else f" ({plan.what})"), err=True)


def collect_live(ctx: Any, show_progress: bool) -> dict[str, Any]:
    from hostcheck.collectors import collect_facts

    if not show_progress:
        return collect_facts(ctx)
    from hostcheck.progress import LiveProgress

    with LiveProgress() as progress:
        return collect_facts(ctx, progress=progress.update)
