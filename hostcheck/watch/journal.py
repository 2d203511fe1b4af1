"""Boots, shutdown records and kernel lines from the systemd journal (`journalctl -o json`).

The journal is reached through a command prefix (``journalctl`` by default) so that the same
code reads a journal file written elsewhere (``journalctl --file F``): tests feed real journal
files made by ``systemd-journal-remote`` where a real kernel log cannot be written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hostcheck.collectors._run import CommandResult, run_command
from hostcheck.facts import Unknown
from hostcheck.watch.sampler import Sink

# sd-messages.h: SD_MESSAGE_SHUTDOWN ("System is shutting down"), SD_MESSAGE_JOURNAL_STOP
# ("Journal stopped", written by journald as it stops at shutdown). Either at the end of a
# boot means it was shut down cleanly; neither means it stopped without shutting down
# (power cut, hard reset, kernel panic, a killed container).
SHUTDOWN_MESSAGE_IDS = frozenset({"98268866d1d54a499c4e98921d93bc40", "d93fb3c9c24d451a97cea615ce59c00b"})
SHUTDOWN_TEXTS = ("Journal stopped", "System is powering down", "System is rebooting", "Reached target System Reboot",
                  "Reached target System Power Off", "Reached target Power-Off", "Reached target Reboot")
TAIL_ENTRIES = 60
MAX_KERNEL_ENTRIES = 5000
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class JournalBoot:
    boot_id: str
    first_t: float
    last_t: float


class Journal:
    def __init__(self, command: list[str] | None = None):
        self.command = command or ["journalctl"]

    def _run(self, args: list[str]) -> CommandResult | Unknown:
        result = run_command([*self.command, "--no-pager", "-q", *args], timeout=TIMEOUT_S)
        if isinstance(result, Unknown):
            return result
        if result.returncode != 0:
            why = result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"]
            return Unknown(f"journalctl failed: {why[0][:200]}")
        return result

    def boots(self) -> list[JournalBoot] | Unknown:
        result = self._run(["--list-boots", "-o", "json"])
        if isinstance(result, Unknown):
            return result
        try:
            rows = json.loads(result.stdout or "[]")
        except ValueError:
            return Unknown("journalctl --list-boots gave no JSON (systemd older than 250?)")
        boots = []
        for row in rows if isinstance(rows, list) else []:
            try:
                boots.append(JournalBoot(str(row["boot_id"]), int(row["first_entry"]) / 1e6, int(row["last_entry"]) / 1e6))
            except (KeyError, TypeError, ValueError):
                continue
        return boots

    def newest_boot(self) -> str | None:
        """The id of the newest boot this journal holds (on a running system, the running boot
        as journald stamps it); None when the journal cannot be read."""
        boots = self.boots()
        if isinstance(boots, Unknown) or not boots:
            return None
        return max(boots, key=lambda b: b.last_t).boot_id

    def shutdown_record(self, boot_id: str) -> tuple[bool | None, str]:
        """Whether the boot's last journal entries include a shutdown record, and the evidence."""
        result = self._run(["-b", boot_id, "-o", "json", "-n", str(TAIL_ENTRIES)])
        if isinstance(result, Unknown):
            return None, result.reason
        for entry in map(_entry, result.stdout.splitlines()):
            if entry is None:
                continue
            message = str(entry.get("MESSAGE", ""))
            if entry.get("MESSAGE_ID") in SHUTDOWN_MESSAGE_IDS or any(message.startswith(t) for t in SHUTDOWN_TEXTS):
                return True, f"shutdown record in the journal: {message[:80]!r}"
        if not result.stdout.strip():
            return None, "the journal holds no entries for this boot"
        return False, f"no shutdown record in the last {TAIL_ENTRIES} journal entries of the boot"

    def kernel_entries(self, cursor: str | None, since: float) -> tuple[list[dict[str, Any]], str | None] | Unknown:
        """Kernel-transport entries after ``cursor`` (or since ``since``), and the new cursor."""
        args = ["-o", "json", "-n", str(MAX_KERNEL_ENTRIES), "_TRANSPORT=kernel"]
        args += ["--after-cursor", cursor] if cursor else ["--since", f"@{int(since)}"]
        result = self._run(args)
        if isinstance(result, Unknown):
            return result
        entries = [e for e in map(_entry, result.stdout.splitlines()) if e is not None]
        new_cursor = next((str(e["__CURSOR"]) for e in reversed(entries) if "__CURSOR" in e), cursor)
        return entries, new_cursor


class Readability:
    """Whether the journal could be read at the last look, recorded when that changes (when it
    becomes unreadable and when it is readable again), not every interval."""

    def __init__(self) -> None:
        self.state: str | None = None  # why it could not be read; None: readable

    def note(self, state: str | None, out: Sink) -> None:
        if state != self.state:
            self.state = state
            out.event("journal", {"readable": state is None, "reason": state or "readable again"})
            if state:
                out.log(f"journal: {state}; boots and kernel lines are not being recorded")


def _entry(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    message = value.get("MESSAGE")
    if isinstance(message, list):  # journald gives non-UTF-8 messages as byte arrays
        value["MESSAGE"] = bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
    return value


def entry_time(entry: dict[str, Any]) -> float | None:
    try:
        return int(entry["__REALTIME_TIMESTAMP"]) / 1e6
    except (KeyError, TypeError, ValueError):
        return None
