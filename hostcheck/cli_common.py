"""What every command shares: the output formats, error exit, writing the result, live collection.

Kept apart from ``hostcheck.cli`` so that command families in their own modules
(``hostcheck.earnings.cli``, ``hostcheck.watch.cli``) need not import the main CLI module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from hostcheck.exit_codes import EXIT_USAGE

FORMATS = ("table", "json", "markdown")


def die(message: str, code: int = EXIT_USAGE) -> NoReturn:
    from hostcheck.render.escape import escape_text

    typer.echo(f"hostcheck: error: {escape_text(message)}", err=True)
    raise typer.Exit(code)


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
