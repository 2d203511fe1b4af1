"""Command line: `hostcheck audit | facts | policies | explain | offer | earnings | market | report | fleet | watch | selftest ...`.

The root of the command tree only. Each command lives in a module of its own (COMMANDS says
which), imported when the command runs or its help is asked for: `hostcheck --help` stays fast
while the commands import the libraries whose defaults and limits they show. An
:class:`~hostcheck.errors.InputError` that leaves a command becomes its message and exit code 2
here, in one place. Data goes to stdout, diagnostics to stderr.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.completion import completion_init
from typer.core import TyperGroup

from hostcheck import __version__
from hostcheck.commands.common import die
from hostcheck.errors import InputError
from hostcheck.exit_codes import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, help_text


@dataclass(frozen=True)
class CommandSpec:
    target: str
    """``module:attribute``: a command function, or a ``typer.Typer`` of sub-commands."""
    summary: str
    """Its line in `hostcheck --help`."""


COMMANDS: dict[str, CommandSpec] = {
    "audit": CommandSpec(
        "hostcheck.commands.audit:audit",
        "Collect facts (or read --facts), judge them against policies, print the report.",
    ),
    "facts": CommandSpec(
        "hostcheck.commands.audit:facts",
        "Print the raw facts as JSON (to share, or to judge later with --facts).",
    ),
    "policies": CommandSpec(
        "hostcheck.commands.explain:policies",
        "List the shipped policies with their sources.",
    ),
    "explain": CommandSpec(
        "hostcheck.commands.explain:explain",
        "Why a check matters, how to fix it, which policies use it; or what a provider agent takes.",
    ),
    "probe-server": CommandSpec(
        "hostcheck.commands.probe:probe_server",
        "Run on a machine OUTSIDE your network: connects back to the caller on the ports it names.",
    ),
    "speedtest": CommandSpec(
        "hostcheck.commands.probe:speedtest",
        "Measure download, upload, latency and jitter against your probe server.",
    ),
    "offer": CommandSpec(
        "hostcheck.commands.offer:offer",
        "The offer a Vast renter would see, each field labelled, and the power hosting draws.",
    ),
    "fleet": CommandSpec(
        "hostcheck.commands.fleet:fleet_app",
        "One table across many hosts' reports (fleet DIR), or drift between two audits (fleet diff).",
    ),
    "earnings": CommandSpec(
        "hostcheck.commands.earnings:earnings",
        "Will it earn? Net per month per platform, break-even price and occupancy, heat credit.",
    ),
    "market": CommandSpec(
        "hostcheck.commands.market:market_app",
        "What Vast's market pays for this GPU: share rented, price percentiles, your price's place.",
    ),
    "report": CommandSpec(
        "hostcheck.commands.report:report",
        "One self-contained HTML file: the audit of --facts, with earnings and the watch report when given.",
    ),
    "watch": CommandSpec(
        "hostcheck.commands.watch:watch_app",
        "Record a reliability rehearsal; `hostcheck watch report` shows what a platform would see.",
    ),
    "selftest": CommandSpec(
        "hostcheck.commands.selftest:selftest",
        "Load the GPU as the platform's self-test will (not read-only): would it pass?",
    ),
}


def load_command(name: str) -> Any:
    """The click command for COMMANDS[name], imported now."""
    entry = COMMANDS[name]
    module, _, attribute = entry.target.partition(":")
    target = getattr(importlib.import_module(module), attribute)
    if not isinstance(target, typer.Typer):
        single = typer.Typer(add_completion=False, rich_markup_mode=None)
        single.command(name)(target)
        target = single
    command = typer.main.get_command(target)
    command.short_help = entry.summary
    return command


class LazyCommands(MutableMapping[str, Any]):
    """The root's commands by name, each imported on first use."""

    def __init__(self) -> None:
        self.loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded:
            self.loaded[name] = load_command(name)  # KeyError for a name COMMANDS does not have
        return self.loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        raise TypeError(f"the command {name!r} belongs in hostcheck.cli.COMMANDS")

    def __delitem__(self, name: str) -> None:
        raise TypeError("commands are not removed")

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class Root(TyperGroup):
    """`hostcheck`: the commands load lazily; an InputError is the user's: its message, exit 2."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        if self.commands:
            raise TypeError(f"list {', '.join(self.commands)} in hostcheck.cli.COMMANDS instead of registering it on the app")
        self.commands = LazyCommands()

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.summary) for name, entry in COMMANDS.items()])

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        """The exit-code table, written only when the help is shown, as it is (not re-wrapped)."""
        formatter.write_paragraph()
        with formatter.indentation():
            for line in help_text().splitlines():
                formatter.write(f"{' ' * formatter.current_indent}{line}\n")

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        mistake = single_dash_option(self, args)
        if mistake:
            die(mistake)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except InputError as exc:
            die(str(exc))
        except KeyboardInterrupt:  # typer would exit 130 without a word
            typer.echo(("\n" if sys.stderr.isatty() else "") + "hostcheck: interrupted (Ctrl-C)", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None


SINGLE_DASH = re.compile(r"-[A-Za-z][A-Za-z0-9-]+")


def long_options(command: Any) -> set[str]:
    """Every ``--name`` option of ``command`` and of its sub-commands."""
    found = {opt for param in getattr(command, "params", []) for opt in getattr(param, "opts", []) if opt.startswith("--")}
    for sub in getattr(command, "commands", {}).values():
        found |= long_options(sub)
    return found


def single_dash_option(root: Any, args: list[str]) -> str | None:
    """A long option written with one dash (``audit -facts x``, which the parser would read as
    ``-f acts``): the mistake, named in one line; None when there is none."""
    name = next((arg for arg in args if not arg.startswith("-")), None)
    if name not in COMMANDS:
        return None
    known: set[str] | None = None
    for arg in args[args.index(name) + 1:]:
        if arg == "--":
            break
        if SINGLE_DASH.fullmatch(arg):
            known = long_options(root.commands[name]) if known is None else known
            if f"-{arg}" in known:
                return f"{arg}: long options take two dashes: -{arg}"
    return None


app = typer.Typer(
    cls=Root,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Is this machine fit, and safe, to rent out its GPU? A read-only audit against "
    "each platform's published requirements.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hostcheck {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main_options(
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = None,
) -> None:
    """hostcheck: read-only feasibility and risk audit of a GPU host."""


def main() -> None:
    # Shell completion through the environment, with no option of its own on the root:
    # `_HOSTCHECK_COMPLETE=source_bash hostcheck` prints the bash script (README, "Shell
    # completion"), which then asks `hostcheck` for the words. Typer registers its shells here.
    completion_init()
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("hostcheck: interrupted (Ctrl-C)", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as exc:  # the last line of defence: a clear message and exit 1
        typer.echo(f"hostcheck: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
