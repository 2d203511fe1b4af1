"""hostcheck's exit codes, in one table: `hostcheck --help`, `hostcheck earnings --help` and the
"Exit codes" sections of README.md and docs/audit.md (``scripts/gen_exit_codes_doc.py``) are
written from :data:`EXIT_CODES`. The fleet audit (playbooks/audit.yml) reads the audit's 0, 3 and 4.

A module of its own, with no imports, so the CLI can use it without loading the report
machinery at start-up."""

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NOT_FEASIBLE = 3
EXIT_NOT_MEASURED = EXIT_NOT_FEASIBLE
EXIT_POWER_UNKNOWN = EXIT_NOT_FEASIBLE
EXIT_STALE_SOURCES = EXIT_NOT_FEASIBLE
EXIT_OWNER_RISK = 4
EXIT_INTERRUPTED = 130

EVERY_COMMAND = ""

EXIT_CODES: tuple[tuple[int, str, str], ...] = (
    # (code, the command it is said of (EVERY_COMMAND: all of them), what it means: one line)
    (EXIT_OK, "audit", "a requested policy is feasible (--strict: every one) and the owner risk is low or medium"),
    (EXIT_OK, "earnings", "figures computed (the owner risk is low or medium, the draw under load known)"),
    (EXIT_OK, "selftest", "every stage ran on the GPU and passed"),
    (EXIT_OK, EVERY_COMMAND, "any other command: done (speedtest: something was measured)"),
    (EXIT_INTERNAL, EVERY_COMMAND, "internal error: a bug, or a shipped policy or data file that does not load"),
    (EXIT_USAGE, EVERY_COMMAND, "bad input: an option, policy, snapshot, report or file that cannot be used, "
                                "or output that cannot be written"),
    (EXIT_NOT_FEASIBLE, "audit", "no requested policy is feasible (--strict: at least one is not)"),
    (EXIT_POWER_UNKNOWN, "earnings", "the draw under load is unknown, so no money figure (give --wall-load-w)"),
    (EXIT_NOT_MEASURED, "speedtest", "nothing was measured"),
    (EXIT_STALE_SOURCES, "policies", "--stale DAYS: a source was not re-read within the last DAYS days"),
    (EXIT_NOT_MEASURED, "market", "the market was not read: no key, the key refused, no answer, or an answer "
                                  "that cannot be used (nothing recorded)"),
    (EXIT_NOT_FEASIBLE, "selftest", "a stage failed or could not be judged, or it did not start (it says why)"),
    (EXIT_OWNER_RISK, "audit", "a policy is feasible, but the owner risk is high or unknown "
                               "(--accept-owner-risk turns this into 0)"),
    (EXIT_OWNER_RISK, "earnings", "the audit rates the owner risk high or unknown: do not host, whatever the money, "
                                  "also when the power is unknown"),
    (EXIT_INTERRUPTED, EVERY_COMMAND, "interrupted (Ctrl-C), as a shell reports a command killed by SIGINT"),
)

EARNINGS_ORDER = (EXIT_OWNER_RISK, EXIT_POWER_UNKNOWN, EXIT_OK)
"""``hostcheck earnings`` exits with the first of these that applies: what a machine would earn
never overrides a warning not to host on it, and an unknown draw does not hide that warning.
Bad input (2) stops the command before any of them."""


def earnings_exit(*, owner_risk_stops: bool, power_known: bool) -> int:
    applies = {EXIT_OWNER_RISK: owner_risk_stops, EXIT_POWER_UNKNOWN: not power_known, EXIT_OK: True}
    return next(code for code in EARNINGS_ORDER if applies[code])


def rows_for(command: str = EVERY_COMMAND) -> list[tuple[int, str, str]]:
    """Every row, by code; for one ``command``, its own rows and those of every command whose
    code it has no row of its own for."""
    rows = sorted(EXIT_CODES, key=lambda row: row[0])
    if command == EVERY_COMMAND:
        return rows
    own = {code for code, cmd, _ in rows if cmd == command}
    return [row for row in rows if row[1] == command or (row[1] == EVERY_COMMAND and row[0] not in own)]


def meaning(row: tuple[int, str, str], command: str = EVERY_COMMAND) -> str:
    """A row's line: its meaning, after the command it is said of unless that is ``command``."""
    _, said_of, said = row
    return said if said_of in (command, EVERY_COMMAND) else f"{said_of}: {said}"


def _lines(code: int, said: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(said, width=width, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7,
                         break_on_hyphens=False)


def help_text(width: int = 77) -> str:
    """The epilog of `hostcheck --help`: every row, by code."""
    return "\n".join(["Exit codes:", *(line for row in rows_for() for line in _lines(row[0], meaning(row), width))])


def earnings_help_text(width: int = 77) -> str:
    """`hostcheck earnings --help`'s list: bad input, then its codes in the order they apply."""
    said = {row[0]: meaning(row, "earnings") for row in rows_for("earnings")}
    lines = [f"Exit codes: {EXIT_USAGE} for bad input (nothing is computed); otherwise the first that",
             "applies, in this order:"]
    for code in EARNINGS_ORDER:
        lines += _lines(code, said[code], width)
    return "\n".join(lines)


def markdown_table(command: str = EVERY_COMMAND) -> str:
    """README.md's "Exit codes" table (every row), or one command's (docs/audit.md)."""
    out = ["| code | meaning |", "|---|---|"]
    out += [f"| {row[0]} | {meaning(row, command)} |" for row in rows_for(command)]
    return "\n".join(out) + "\n"
