"""``hostcheck earnings``' exit code, defined once: the first entry of EXIT_PRECEDENCE that
applies. ``--help`` prints the same list. Owner risk comes first, as in the audit: what a
machine would earn never overrides a warning not to host on it, and an unknown power draw
does not hide that warning either. Bad input (2) stops the command before any of these.

No imports beyond the exit codes, so ``hostcheck --help`` stays fast."""

from __future__ import annotations

from hostcheck.exit_codes import EXIT_NOT_MEASURED, EXIT_OK, EXIT_OWNER_RISK, EXIT_USAGE

OWNER_RISK = "owner-risk"
POWER_UNKNOWN = "power-unknown"
COMPUTED = "computed"

EXIT_PRECEDENCE: tuple[tuple[int, str, str], ...] = (
    (EXIT_OWNER_RISK, OWNER_RISK, "the audit rates the owner risk high or unknown: the headline says not to host, "
                                  "whatever the money (as the audit's exit code), also when the power is unknown"),
    (EXIT_NOT_MEASURED, POWER_UNKNOWN, "the draw under load is unknown, so no money figure (give --wall-load-w)"),
    (EXIT_OK, COMPUTED, "computed"),
)


def exit_code(*, owner_risk_stops: bool, power_known: bool) -> int:
    applies = {OWNER_RISK: owner_risk_stops, POWER_UNKNOWN: not power_known, COMPUTED: True}
    return next(code for code, name, _ in EXIT_PRECEDENCE if applies[name])


def help_text() -> str:
    import textwrap

    lines = [textwrap.fill(said, width=88, initial_indent=f"  {code}  ", subsequent_indent="     ")
             for code, _, said in EXIT_PRECEDENCE]
    return (f"Exit codes: {EXIT_USAGE} for bad input (nothing is computed); otherwise the first that\n"
            "applies, in this order:\n" + "\n".join(lines))
