"""Processes of this host, not of its containers: rented containers run their own sshd, X, dockerd."""

from __future__ import annotations

import os


def _nspid_depth(pid: str) -> int | None:
    """How many PID namespaces deep a process is (fields of NSpid in its world-readable status)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        return None
    return None


def host_processes() -> list[tuple[int, str]]:
    """(pid, comm) of processes in our own PID namespace; a container's processes sit deeper.

    Kernels without NSpid (before 4.1) cannot tell them apart, so every process is listed.
    """
    own = _nspid_depth("self")
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        if own is not None and _nspid_depth(pid) not in (own, None):
            continue
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                found.append((int(pid), fh.read().strip()))
        except OSError:
            continue  # exited meanwhile, or hidden by hidepid
    return found


def host_process_names() -> list[str]:
    return [comm for _pid, comm in host_processes()]
