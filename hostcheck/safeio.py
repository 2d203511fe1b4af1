"""Bounded input and safe output for files users hand to hostcheck.

Facts snapshots, policies and fleet reports come from other people. Every read here is
size-limited and refuses anything that is not a regular file (a FIFO would block forever,
/dev/zero would never end); JSON is strict (no NaN/Infinity, bounded nesting, bounded
integers); reports are written atomically and never through a symlink.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

MAX_INPUT_BYTES = 16 << 20
"""Largest snapshot, policy or report read (real ones are well under 1 MiB)."""
MAX_DEPTH = 64
"""Deepest JSON/YAML nesting accepted (real facts are under 10 levels deep)."""


class InputError(ValueError):
    """A file that cannot be used; the message says why (no path: callers add it)."""


def read_bytes(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The whole file, if it is a regular file of at most ``limit`` bytes."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; checked on the open fd,
        # so the file cannot be swapped between the check and the read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError("not a regular file (a FIFO, device or directory cannot be read as input)")
        if info.st_size > limit:
            raise InputError(f"too large ({info.st_size} bytes; the limit is {limit})")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise InputError(f"too large (more than {limit} bytes)")
    return data


def read_text(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})") from exc


def _reject_constant(name: str) -> Any:
    raise InputError(f"{name} is not a JSON number")


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
        raise InputError(f"line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}") from exc
    except RecursionError as exc:
        raise InputError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels") from exc
    except InputError as exc:
        raise InputError(f"invalid JSON: {exc}") from exc
    except ValueError as exc:  # an integer past Python's int_max_str_digits
        raise InputError("invalid JSON: an integer is out of range") from exc
    if depth(data) > MAX_DEPTH:
        raise InputError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels")
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
            raise InputError("invalid JSON: a number is out of range (infinite)")
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            raise InputError("invalid JSON: an integer is out of range")
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


def write_atomic(path: Path, text: str, private: bool) -> None:
    """Replace ``path`` with ``text`` in one step; a symlink at ``path`` is replaced, never followed.

    The data goes to a new file in the same directory (created exclusively, so no symlink
    can be planted under its name) and is renamed over ``path``: readers see the old or the
    new report, never half of one. ``private`` makes it 0600 (an unredacted report names
    users, addresses and serials).
    """
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir() and not path.is_symlink():
        raise OSError(21, "Is a directory", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a shareable report gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
