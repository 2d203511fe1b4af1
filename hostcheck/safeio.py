"""Bounded input and safe output for files users hand to hostcheck.

Facts snapshots, policies and fleet reports come from other people. Every read here is
size-limited and refuses anything that is not a regular file (a FIFO would block forever,
/dev/zero would never end); JSON is strict (no NaN/Infinity, bounded nesting, bounded
integers). Output goes where the user pointed it without ever replacing what is not a
regular file: see ``write_output``.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.errors import FileInputError, OutputRefused

MAX_INPUT_BYTES = 16 << 20
"""Largest snapshot, policy or report read (real ones are well under 1 MiB)."""
MAX_DEPTH = 64
"""Deepest JSON/YAML nesting accepted (real facts are under 10 levels deep)."""


def read_bytes(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The whole file, if it is a regular file of at most ``limit`` bytes."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; checked on the open fd,
        # so the file cannot be swapped between the check and the read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise FileInputError(f"cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileInputError("a directory, not a regular file: name a file in it")
        if not stat.S_ISREG(info.st_mode):
            raise FileInputError("not a regular file (a FIFO, device or directory cannot be read as input)")
        if info.st_size > limit:
            raise FileInputError(f"too large ({info.st_size} bytes; the limit is {limit})")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise FileInputError(f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise FileInputError(f"too large (more than {limit} bytes)")
    return data


def read_text(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileInputError(f"not UTF-8 text (byte {exc.start})") from exc


def _reject_constant(name: str) -> Any:
    raise FileInputError(f"{name} is not a JSON number")


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of containers, stopping (and returning limit + 1) past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads(text: str) -> Any:
    """Strict JSON: NaN/Infinity, nesting deeper than MAX_DEPTH and huge integers are errors."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise FileInputError(f"line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}") from exc
    except RecursionError as exc:
        raise FileInputError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels") from exc
    except FileInputError as exc:
        raise FileInputError(f"invalid JSON: {exc}") from exc
    except ValueError as exc:  # an integer past Python's int_max_str_digits
        raise FileInputError("invalid JSON: an integer is out of range") from exc
    if depth(data) > MAX_DEPTH:
        raise FileInputError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels")
    _check_numbers(data)
    return data


MAX_INT = 1 << 64
"""Largest integer magnitude accepted: facts hold counts and sizes, never bignums (which
would overflow later float arithmetic)."""


def _check_numbers(value: Any) -> None:
    """1e999 parses as inf without passing parse_constant; refuse it like Infinity."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise FileInputError("invalid JSON: a number is out of range (infinite)")
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            raise FileInputError("invalid JSON: an integer is out of range")
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def load_json(path: Path, limit: int = MAX_INPUT_BYTES) -> Any:
    return loads(read_text(path, limit))


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON out, never NaN/Infinity (which other JSON readers reject)."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


STDOUT = "-"
"""``-o -`` means standard output (a file named ``-`` is ``./-``)."""
MAX_SYMLINK_HOPS = 40
"""As many links as the kernel follows before ELOOP."""
FIFO_STALL_S = 30.0
"""Longest a FIFO's reader may leave a write unread before we give up (never hang)."""
_FD_DIR = re.compile(r"^/proc/\d+/(task/\d+/)?fd$")


@dataclass(frozen=True)
class OutputPlan:
    """How a report reaches ``path``: ``atomic`` (a regular file or a new path, replaced in one
    step), ``through`` (a character device or FIFO, opened as it is), ``append`` (a regular file
    behind one of our own open descriptors, /dev/stdout redirected to a file: written at its
    end as the descriptor would be, never truncated or renamed) or ``stdout``."""

    how: str
    path: str
    what: str


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "a special file"


def _trusted_owners() -> set[int]:
    # Root owns the system's own links (/dev/stdout, /dev/fd); anyone else's link could be a
    # trap planted in a shared directory such as /tmp (``ln -s /etc/shadow /tmp/report.json``).
    return {os.geteuid(), 0}


def plan_output(path: Path | str) -> OutputPlan:
    """Decide how ``path`` is written, or raise OutputRefused; writes nothing.

    The rule: a new path or a regular file is replaced atomically. A character device
    (/dev/null, a terminal) or a FIFO is written through, never replaced. A symlink is followed
    only when every link on the way is owned by the caller or by root: to a device or FIFO it
    is written through, to a regular file that file is replaced atomically (the link stays), to
    one of our own descriptors (/dev/stdout) the descriptor's file is written as the
    descriptor would be. Anything else (a directory, socket, block device, a symlink owned by
    someone else, a dangling symlink, a link loop) is refused.
    """
    name = str(path)
    if name == STDOUT:
        return OutputPlan("stdout", name, "standard output")
    try:
        info = os.lstat(name)
    except FileNotFoundError:
        return OutputPlan("atomic", name, "a new file")
    except OSError as exc:
        raise OutputRefused(exc.errno or 0, f"cannot inspect it: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        return _plan_symlink(name)
    return _plan_kind(name, info.st_mode, name)


def _plan_kind(name: str, mode: int, shown: str, via_fd: bool = False) -> OutputPlan:
    what = _kind(mode)
    if stat.S_ISREG(mode):
        return OutputPlan("append" if via_fd else "atomic", name, what)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return OutputPlan("through", name, what)
    raise OutputRefused(0, f"{shown} is {what}; only a regular file, a new path, a character device or a FIFO is written")


def _plan_symlink(name: str) -> OutputPlan:
    trusted = _trusted_owners()
    hop, via_fd = name, False
    for _ in range(MAX_SYMLINK_HOPS):
        try:
            info = os.lstat(hop)
        except FileNotFoundError:
            raise OutputRefused(2, f"a dangling symlink (it points to {hop}, which does not exist)") from None
        except OSError as exc:
            raise OutputRefused(exc.errno or 0, f"a symlink that cannot be followed: {exc.strerror or exc}") from exc
        if not stat.S_ISLNK(info.st_mode):
            return _plan_kind(os.path.realpath(name) if not via_fd else name, info.st_mode,
                              f"a symlink to {hop}, which", via_fd)
        if info.st_uid not in trusted:
            raise OutputRefused(
                1, f"a symlink ({hop}) owned by uid {info.st_uid}, not by you or root: it is not followed "
                "(a link planted in a shared directory could point anywhere); remove it or name the file itself"
            )
        parent = os.path.realpath(os.path.dirname(hop) or ".")
        if _FD_DIR.match(parent):
            # /proc/<pid>/fd/N names an open descriptor ("pipe:[123]", "/x (deleted)"): the
            # kernel resolves it, not the text of the link.
            via_fd = True
            try:
                return _plan_kind(name, os.stat(name).st_mode, f"a symlink to open descriptor {hop}, which", via_fd)
            except OSError as exc:
                raise OutputRefused(exc.errno or 0, f"a symlink to {hop}: {exc.strerror or exc}") from exc
        hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
    raise OutputRefused(40, f"a symlink chain longer than {MAX_SYMLINK_HOPS} links (a loop?)")


def write_output(path: Path | str, text: str, private: bool) -> OutputPlan:
    """Write ``text`` where ``path`` points, by the rule of ``plan_output``; return the plan used.

    Every failure (refused target, FIFO without a reader, ENOSPC, EIO) raises OSError; a failed
    atomic write leaves the old file as it was and no temporary file behind.
    """
    plan = plan_output(path)
    data = text.encode("utf-8")
    if plan.how == "stdout":
        import sys

        sys.stdout.flush()
        _write_fd(sys.stdout.fileno(), data)
    elif plan.how == "atomic":
        _write_atomic(Path(plan.path), data, private)
    else:
        _write_through(plan, data)
    return plan


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            # A FIFO whose reader is not keeping up: wait for room, but not forever.
            _, ready, _ = select.select([], [fd], [], FIFO_STALL_S)
            if not ready:
                raise OSError(11, f"the FIFO's reader took nothing for {FIFO_STALL_S:g} s") from None
            continue
        if written <= 0:
            raise OSError(5, "the write made no progress")
        view = view[written:]


def _write_through(plan: OutputPlan, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if plan.how == "append":
        flags |= os.O_APPEND
    if plan.what == "a FIFO":
        flags |= os.O_NONBLOCK  # no reader: ENXIO at once instead of blocking in open()
    try:
        fd = os.open(plan.path, flags)  # no O_CREAT, no O_TRUNC: it exists and stays what it is
    except OSError as exc:
        if exc.errno == 6 and plan.what == "a FIFO":  # ENXIO
            raise OSError(6, "a FIFO with no reader (start the reading side first)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        expected = stat.S_ISREG(mode) if plan.how == "append" else (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode))
        if not expected:  # swapped between the check and the open: nothing was written yet
            raise OutputRefused(0, f"it changed into {_kind(mode)} while being opened")
        _write_fd(fd, data)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes, private: bool) -> None:
    """Replace ``path`` with ``data`` in one step.

    The data goes to a new file in the same directory (created exclusively, so no symlink
    can be planted under its name), is flushed to disk and renamed over ``path``: readers see
    the old or the new report, never half of one. ``private`` makes it 0600 (an unredacted
    report names users, addresses and serials).
    """
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        try:
            _write_fd(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a shareable report gets the usual mode
        try:
            now = os.lstat(path).st_mode
        except FileNotFoundError:
            now = stat.S_IFREG
        if not stat.S_ISREG(now):  # a device or FIFO put there meanwhile is never replaced
            raise OutputRefused(0, f"it changed into {_kind(now)} while being written")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable; some file systems cannot sync a directory (no harm)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
