"""Secrets on disk (the probe token, the TLS key and its directory) must be private.

As ssh does with private keys: a file or directory that another user could read, or replace,
is refused with the command that fixes it, rather than used: checks on a ``stat`` result, and
one reader of a small secret file that applies them to the file it opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hostcheck.errors import PrivateFileError


def check_private(path: Path, st: os.stat_result, *, directory: bool = False) -> None:
    """PrivateFileError unless ``path`` (as ``st`` describes it) is owned by us or root and has
    no permission bits for group or others."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise PrivateFileError(f"{path}: owned by uid {st.st_uid}, not by you (uid {me}) or root: refused")
    loose = stat.S_IMODE(st.st_mode) & 0o077
    if loose:
        who = " and ".join(w for w, bits in (("group", 0o070), ("others", 0o007)) if loose & bits)
        fix = "chmod 700" if directory else "chmod 600"
        raise PrivateFileError(
            f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets {who} read or change it; "
            f"it holds a secret, so it is refused: {fix} {path}"
        )


def read_private(path: Path, limit: int) -> bytes:
    """At most ``limit`` + 2 bytes of the secret in ``path`` (so a caller sees an over-long one),
    checked on the descriptor it reads: a regular file, private. PrivateFileError when it is not;
    OSError when it cannot be read."""
    # O_NONBLOCK: a FIFO without a writer must not hang us before the check below.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PrivateFileError(f"{path}: not a regular file")
        check_private(path, st)
        return fh.read(limit + 2)
