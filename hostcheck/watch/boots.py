"""The boot the recorder records in, and the boots before it as the journal has them.

At start-up the recorder keys its samples by :func:`read_boot_id` and, through
:func:`sync_boots`, writes each boot the journal lists: whether an ended boot shut down
cleanly (a shutdown record among its last entries) or just stopped, and a ``boot`` event the
first time a boot is seen.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hostcheck.facts import Unknown
from hostcheck.recording.store import Boot
from hostcheck.watch.journal import Journal, Readability
from hostcheck.watch.sampler import Sink

BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
CONTAINER_MARK = Path("/run/systemd/container")
# Container managers that give each container boot a boot id of its own, over the kernel's
# (systemd-nspawn's setup_boot_id(), LXC's lxc_setup_boot_id()): the container's journal tells
# its boots apart by it, so the recorder keys boots the same way.
OWN_BOOT_ID_MANAGERS = frozenset({"systemd-nspawn", "lxc", "lxc-libvirt"})


def read_boot_id(path: Path = BOOT_ID_PATH, container_mark: Path = CONTAINER_MARK,
                 journal_boot: str | None = None) -> str:
    """The running boot's id as the journal has it (journald stamps each entry with the
    ``_BOOT_ID`` it reads from ``/proc/sys/kernel/random/boot_id`` in its own, unsandboxed view).

    On a machine that is not a container that file is the kernel's and reads the same in any
    unit. In a container it can differ: the manager mounts the container's own id over it, and a
    unit under ``ProtectKernelTunables=yes`` gets ``/proc/sys`` mounted afresh without that
    mount, so it reads the host kernel's id. ``journal_boot`` is the newest boot in the system
    journal: where it differs from what this process reads, this process's view is the hidden
    one, and the journal's is taken. A container whose manager gives no boot id of its own shares
    the kernel's across its reboots, so there the start time of its PID 1 is added: each
    container boot gets a key of its own (its journal cannot tell those boots apart; the
    recorder's own stop records then do)."""
    try:
        boot_id = path.read_text(encoding="ascii").strip().replace("-", "")
    except OSError:
        return journal_boot or "unknown"
    try:
        manager = container_mark.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return boot_id  # not a container
    if journal_boot and journal_boot != boot_id:
        return journal_boot
    if manager in OWN_BOOT_ID_MANAGERS:
        return boot_id
    try:
        fields = Path("/proc/1/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return f"{boot_id}.{fields[19]}"  # field 22 of stat: start time after the kernel booted
    except (OSError, IndexError):
        return boot_id


def sync_boots(journal: Journal, readability: Readability, out: Sink, wall: Callable[[], float]) -> None:
    """Write the journal's boots (the running one too, listed or not) and a ``boot`` event for
    each ended boot not written before."""
    boots = journal.boots()
    if isinstance(boots, Unknown):
        readability.note(f"boot list unreadable: {boots.reason}", out)
        out.writer.put_boot(Boot(out.boot_id, wall(), None, None, "boot seen by the recorder only"))
        return
    known = {row[0] for row in out.writer.conn.execute("SELECT boot_id FROM boots")}
    for boot in boots:
        if boot.boot_id == out.boot_id:
            out.writer.put_boot(Boot(boot.boot_id, boot.first_t, None, None, "current boot"))
            continue
        # A boot that has ended: did it shut down, or just stop?
        clean, evidence = journal.shutdown_record(boot.boot_id)
        if clean is None and boot.boot_id in known:
            continue
        out.writer.put_boot(Boot(boot.boot_id, boot.first_t, boot.last_t, clean, evidence))
        if boot.boot_id not in known:
            out.event("boot", {"boot_id": boot.boot_id, "clean": clean, "evidence": evidence}, t=boot.first_t)
    if out.boot_id not in {b.boot_id for b in boots}:
        out.writer.put_boot(Boot(out.boot_id, wall(), None, None, "current boot (not in the journal)"))
