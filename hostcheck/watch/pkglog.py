"""Changes of the packages that break hosting when they move, from dpkg's log.

dpkg writes one line per action: ``2026-11-30 10:11:12 upgrade nvidia-driver-550:amd64 550.54.14 550.90.07``
(local time). Only what is new since the last read is parsed: the reader keeps the file's
inode and offset, and starts over when the log was rotated. :class:`PackageChanges` is the
recorder's sampler: each change an event at the log's own time, the position kept in the database.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from hostcheck.watch.sampler import Sink, Tick

DPKG_LOG = Path("/var/log/dpkg.log")
WATCHED_PREFIXES = ("nvidia", "libnvidia", "cuda-drivers", "docker", "containerd", "linux-image", "moby")
ACTIONS = frozenset({"install", "upgrade", "remove", "purge"})
MAX_READ_BYTES = 4 << 20


@dataclass(frozen=True)
class PackageChange:
    t: float
    action: str
    package: str
    old: str
    new: str


def is_watched(package: str) -> bool:
    return package.split(":")[0].startswith(WATCHED_PREFIXES)


def parse_line(line: str) -> PackageChange | None:
    parts = line.split()
    if len(parts) != 6 or parts[2] not in ACTIONS or not is_watched(parts[3]):
        return None
    try:
        t = time.mktime(time.strptime(f"{parts[0]} {parts[1]}", "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None
    return PackageChange(t, parts[2], parts[3].split(":")[0], parts[4], parts[5])


def read_new(path: Path, position: str | None) -> tuple[list[PackageChange], str, str | None]:
    """(changes since ``position``, the new position "inode:offset", a reason when unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], position or "", None  # no dpkg (or no log yet): nothing changed
    except OSError as exc:
        return [], position or "", f"cannot read {path}: {exc.strerror or exc}"
    with open(fd, "rb") as fh:
        st = os.fstat(fd)
        inode, offset = st.st_ino, 0
        if position and position.count(":") == 1:
            old_inode, old_offset = position.split(":")
            if old_inode.isdigit() and old_offset.isdigit() and int(old_inode) == inode and int(old_offset) <= st.st_size:
                offset = int(old_offset)
        fh.seek(offset)
        data = fh.read(MAX_READ_BYTES)
    end = data.rfind(b"\n") + 1  # a half-written last line is read next time
    changes = [c for c in map(parse_line, data[:end].decode("utf-8", "replace").splitlines()) if c is not None]
    return changes, f"{inode}:{offset + end}", None


class PackageChanges:
    name = "packages"

    def __init__(self, path: Path = DPKG_LOG) -> None:
        self.path = path

    def sample(self, tick: Tick, out: Sink) -> None:
        now = tick.wall
        position = out.writer.get_meta("dpkg_position")
        changes, new_position, problem = read_new(self.path, position)
        if problem:
            out.log(problem)
        for change in changes:
            if position is None and change.t < now - 86400:
                continue  # first read: only the last day of history
            out.event("package", {"action": change.action, "package": change.package, "old": change.old, "new": change.new}, t=change.t)
        if new_position and new_position != position:
            out.writer.set_meta("dpkg_position", new_position)
