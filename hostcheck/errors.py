"""The one base class of errors that are the user's input, not a bug.

A library raises a subclass of :class:`InputError` when what it was given (an option's value,
a snapshot, a policy, a report directory, a config file, a watch database) cannot be used;
the message says what and why. The command line turns every one of them into its message and
exit code 2 in a single place (``hostcheck.cli``); anything else that escapes a command is an
internal error (exit 1).

A module of its own, with no imports, so that every library can derive from it without
loading anything at start-up.
"""


class InputError(ValueError):
    """Input that cannot be used; the message is for the user and says why."""
