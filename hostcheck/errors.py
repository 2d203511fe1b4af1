"""Every exception class of hostcheck that leaves the module raising it, in one place.

The user's input: a library raises a subclass of :class:`InputError` when what it was given (an
option's value, a snapshot, a policy, a report directory, a config file, a watch database)
cannot be used; the message says what and why. The command line turns every one of them into
its message and exit code 2 (:data:`hostcheck.exit_codes.EXIT_USAGE`) in a single place
(``hostcheck.cli``). Anything else that escapes a command is an internal error (exit 1): the
other classes here are caught by the code that calls the raiser, which says what they mean
there (a probe that failed, a shipped data file that does not load, a programming error).

No imports, so that every module can use them without loading anything at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


# --- the user's input: exit 2 -------------------------------------------------------------


class InputError(ValueError):
    """Input that cannot be used; the message is for the user and says why."""


class UsageError(InputError):
    """An option's value, or a combination of options, that cannot be used."""


class FileInputError(InputError):
    """A file that cannot be used (not a regular file, too large, bad JSON); the message says
    why, without the path: callers add it."""


class PolicyError(InputError):
    """A policy that cannot be used; the message names file, line or field, and the reason."""


class FactsError(InputError):
    """A facts snapshot that cannot be used (bad JSON, wrong shape, wrong version)."""


class FleetError(InputError):
    """Input the fleet view cannot use (no reports, unreadable file, other report version)."""


class WatchDbError(InputError):
    """The database cannot be used; the message says why and what to do. Nothing was changed."""


class EarningsInputError(InputError):
    """Bad input from the owner for ``hostcheck earnings``: the message names the field."""


class EarningsMissingError(EarningsInputError):
    """A required field was not given (every field that was given is valid)."""

    def __init__(self, missing: list[tuple[str, str]], config: Path | None = None) -> None:
        self.missing = [name for name, _ in missing]
        said = "; ".join(f"{name} ({why})" for name, why in missing)
        where = f" (as a flag or in {config})" if config is not None else ""
        super().__init__(f"missing{where}: {said}")


# --- files and data the program reads or writes ---------------------------------------------


class OutputRefused(OSError):
    """An output path that is never written: the message names what is there and why."""


class UpgradeError(ValueError):
    """Facts that are not of a format this hostcheck can read or upgrade."""


class EconomicsDataError(ValueError):
    """A platform data file or the constants file that cannot be used; names file, line, field."""


class UndeclaredFact(LookupError):
    """A fact path that is not declared in :mod:`hostcheck.fact_paths`: a programming error (a
    typo, or a fact added to a collector without declaring it), never "not collected"."""


class Missing(Exception):
    """Raised by :func:`hostcheck.checks.base.need` when a fact is Unknown; the check runner
    turns it into an ``unknown`` outcome."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# --- network probes and notifications -------------------------------------------------------


class PortRangeError(ValueError):
    """A port range that cannot be used (the message says why)."""


class PrivateFileError(ValueError):
    """A secret's file or directory is open to others (the message says how to fix it)."""


class SpeedParamError(ValueError):
    """Bad ``seconds``/``bytes`` parameters of a speed test request (HTTP 400)."""


class ProbeRequestError(ValueError):
    """A probe request the server refuses (HTTP 400; the message says why)."""


class StunDecodeError(ValueError):
    """A packet that is not a usable STUN message (the reason is the message)."""


class StunMismatch(StunDecodeError):
    """A well-formed STUN message for another transaction (ignored by the client)."""


class ServerError(Exception):
    """The probe server could not be reached, or answered in a way we do not accept."""


class SendError(Exception):
    """A notification that could not be sent; ``retry`` says whether trying again may help."""

    def __init__(self, reason: str, retry: bool):
        super().__init__(reason)
        self.retry = retry


class FormatDeclined(UsageError):
    """An output format that does not render this kind of report (the message names both, and
    the formats that do)."""
