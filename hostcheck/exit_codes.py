"""hostcheck's exit codes, in one place (README "Exit codes"; the Ansible roles gate on 0/3/4).

A module of its own, with no imports, so the CLI can use the names without loading the
report machinery at start-up."""

EXIT_OK = 0
EXIT_INTERNAL = 1
"""An unexpected exception (or a shipped policy that does not load): a bug, not the user's input."""
EXIT_USAGE = 2
"""Bad option, malformed policy or snapshot, unwritable output."""
EXIT_NOT_FEASIBLE = 3
"""audit: no requested policy is feasible. speedtest: nothing was measured (EXIT_NOT_MEASURED)."""
EXIT_NOT_MEASURED = EXIT_NOT_FEASIBLE
EXIT_OWNER_RISK = 4
"""audit: a policy is feasible but the owner risk is high or unknown."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports a SIGINT-killed command (128 + 2)."""
