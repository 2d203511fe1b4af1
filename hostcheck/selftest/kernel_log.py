"""The kernel's log lines since the self-test started (for Xid and AER lines), bounded in time
and size."""

from __future__ import annotations

import shutil
import subprocess

TIMEOUT_S = 15.0
MAX_BYTES = 2 << 20


def journal_kernel_lines(since: float) -> list[str] | str:
    """The kernel's lines since ``since`` (epoch seconds), or why they could not be read."""
    journalctl = shutil.which("journalctl")
    if journalctl is None:
        return "journalctl is not installed: the kernel log was not read"
    try:
        done = subprocess.run([journalctl, "-k", "--no-pager", "-o", "cat", "--since", f"@{int(since) - 1}"],
                              capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"journalctl did not answer in {TIMEOUT_S:g} s"
    except OSError as exc:
        return f"journalctl could not run: {exc.strerror or exc}"
    if done.returncode != 0:
        said = done.stderr[:300].decode("utf-8", "replace").strip()
        return f"journalctl -k failed: {said or done.returncode} (run as root, or in the adm or systemd-journal group)"
    return done.stdout[-MAX_BYTES:].decode("utf-8", "replace").splitlines()
