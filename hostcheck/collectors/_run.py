"""Small, bounded helpers for collectors: every command has a timeout, every read a reason."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hostcheck.facts import Unknown

DEFAULT_CMD_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


def run_command(argv: list[str], timeout: float = DEFAULT_CMD_TIMEOUT_S) -> CommandResult | Unknown:
    """Run a read-only command; a missing tool, a timeout or an OS error is an Unknown."""
    if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
        return Unknown(f"'{argv[0]}' is not installed")
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        return Unknown(f"'{' '.join(argv)}' timed out after {timeout:g}s")
    except OSError as exc:
        return Unknown(f"'{argv[0]}' could not run: {exc.strerror or exc}")
    return CommandResult(proc.returncode, proc.stdout, proc.stderr)


def read_text(path: str | Path, limit: int = 1 << 20) -> str | Unknown:
    """Read a small system file; permission and absence become reasons, not exceptions."""
    try:
        # O_NONBLOCK and the fstat check: a FIFO or device planted where a config file should be
        # must not block the audit or feed it forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, encoding="utf-8", errors="replace", closefd=True) as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return Unknown(f"cannot read {path}: not a regular file")
            return fh.read(limit)
    except FileNotFoundError:
        return Unknown(f"{path} does not exist")
    except PermissionError:
        return Unknown(f"permission denied reading {path} (needs root)")
    except OSError as exc:
        return Unknown(f"cannot read {path}: {exc.strerror or exc}")
