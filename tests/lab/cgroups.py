"""A cgroup of its own for every nspawn lab host.

Why: ``systemd-nspawn --keep-unit --register=no`` (no system bus here) puts the container in
``<cgroup of the caller>/payload`` and itself in ``.../supervisor``. Started from the same
process, every lab host (and every other lab session on the machine) got the *same*
``/payload``: eight container systemds then create and remove the same
``system.slice/<unit>`` folders. When one container's unit finishes first and its cgroup is
removed while another container is about to attach a process to its own unit of that name,
the second unit fails with ``status=219/CGROUP`` ("Failed to attach to cgroup
/system.slice/systemd-user-sessions.service: No such file or directory"). Losing
``systemd-user-sessions.service`` leaves ``/run/nologin`` in place, so sshd's PAM refuses
admin forever ("System is booting up", a banner ssh prints only at LogLevel INFO): the host
never gets SSH. CPU load widens the window, which is why 8 hosts at once failed on a busy
2-core machine.

The fix: the host's supervisor joins ``<own cgroup>/hcl-<sid>-<i>`` in the hierarchies that
systemd tracks units with (the named ``systemd`` v1 hierarchy and/or cgroup2), so nspawn's
``payload`` lies below a folder no other container shares. The folders carry the session
marker; :func:`marked` finds them for the leftover check and the reaper.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC_SELF = Path("/proc/self")


def _hierarchies() -> list[tuple[str, Path, str]]:
    """``(kind, mountpoint, mount root)`` of the named systemd v1 hierarchy and cgroup2."""
    found: dict[str, tuple[str, Path, str]] = {}
    try:
        lines = (PROC_SELF / "mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        fstype, options = tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            kind = "cgroup2"
        elif fstype == "cgroup" and "name=systemd" in options:
            kind = "systemd"
        else:
            continue
        if kind not in found:
            mountpoint = Path(fields[4].replace("\\040", " "))
            found[kind] = (kind, mountpoint, fields[3])
    return list(found.values())


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per kind (from /proc/self/cgroup)."""
    paths: dict[str, str] = {}
    try:
        lines = (PROC_SELF / "cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths["cgroup2"] = parts[2]
        elif "name=systemd" in parts[1].split(","):
            paths["systemd"] = parts[2]
    return paths


def roots() -> list[Path]:
    """Mountpoints of the hierarchies a container's systemd tracks its units in."""
    return [mountpoint for _, mountpoint, _ in _hierarchies()]


def create(name: str) -> tuple[list[Path], str]:
    """Create ``<own cgroup>/<name>`` in every tracking hierarchy; returns the folders and,
    when none could be made, why (the host then runs without isolation, and says so)."""
    own = _own_paths()
    folders: list[Path] = []
    problems: list[str] = []
    for kind, mountpoint, mount_root in _hierarchies():
        path = own.get(kind)
        if path is None:
            continue
        if mount_root != "/":
            if not (path == mount_root or path.startswith(mount_root.rstrip("/") + "/")):
                problems.append(f"{kind}: own cgroup {path} is outside the mounted {mount_root}")
                continue
            path = path[len(mount_root.rstrip("/")):] or "/"
        folder = mountpoint / path.lstrip("/") / name
        try:
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            problems.append(f"{kind}: {folder}: {exc.strerror}")
            continue
        folders.append(folder)
    if not folders and not problems:
        problems.append("no name=systemd or cgroup2 hierarchy mounted")
    return folders, "; ".join(problems)


def pids(folders: list[Path]) -> list[int]:
    """Every process in ``folders`` and below."""
    found: set[int] = set()
    for folder in folders:
        for dirpath, _, _ in os.walk(folder):
            try:
                text = (Path(dirpath) / "cgroup.procs").read_text()
            except OSError:
                continue
            found.update(int(p) for p in text.split() if p.isdigit())
    return sorted(found)


def remove(folders: list[Path], timeout: float = 10) -> list[str]:
    """Remove ``folders`` and their sub-cgroups (deepest first), waiting up to ``timeout``
    for exiting processes to leave; returns what could not be removed."""
    deadline = time.monotonic() + timeout
    while True:
        left: list[str] = []
        for folder in folders:
            if not folder.exists():
                continue
            for dirpath, _, _ in sorted(os.walk(folder), key=lambda entry: -len(Path(entry[0]).parts)):
                try:
                    os.rmdir(dirpath)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    left.append(f"{dirpath}: {exc.strerror}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def marked(prefix: str, max_depth: int = 8) -> list[Path]:
    """Cgroup folders whose name starts with ``prefix`` anywhere in the tracking hierarchies
    (not below one another)."""
    found: list[Path] = []
    for root in roots():
        base_depth = len(root.parts)
        for dirpath, dirnames, _ in os.walk(root):
            here = Path(dirpath)
            keep = []
            for name in dirnames:
                if name.startswith(prefix):
                    found.append(here / name)
                elif len(here.parts) - base_depth < max_depth:
                    keep.append(name)
            dirnames[:] = keep
    return found
