"""The recorder's kernel-log sampler: new NVIDIA Xid and PCIe AER lines from the journal, each
an event at the line's own time, classified by :mod:`hostcheck.watch.xid`.

It reads from the cursor kept in the database (the first run reads the last day), so a line is
recorded once across restarts. An Xid of this boot whose catalogue action is a GPU reset or a
reboot takes the GPU out of service until the driver says otherwise (Xid 154 with no action
needed); the GPU's sample reads that from :attr:`KernelLines.gpu_out_of_service`.
"""

from __future__ import annotations

from typing import Any

from hostcheck.facts import Unknown
from hostcheck.watch.journal import Journal, Readability, entry_time
from hostcheck.watch.sampler import Sink, Tick
from hostcheck.watch.xid import FALLEN_OFF_XID, classify_line, pci_slot

SAME_LOSS_S = 300.0  # an unnumbered "fallen off the bus" this soon after Xid 79 of the GPU repeats it


class KernelLines:
    name = "kernel_lines"

    def __init__(self, journal: Journal, readability: Readability) -> None:
        self.journal = journal
        self.readability = readability
        self.gpu_out_of_service: str | None = None  # the Xid this boot whose catalogue action is a GPU reset or reboot
        self.fallen_off_at: dict[str, float] = {}  # PCI slot -> when its numbered Xid 79 was logged

    def sample(self, tick: Tick, out: Sink) -> None:
        now = tick.wall
        cursor = out.writer.get_meta("kernel_cursor")
        result = self.journal.kernel_entries(cursor, since=now - 86400)
        if isinstance(result, Unknown):
            self.readability.note(f"kernel log unreadable: {result.reason}", out)
            return
        self.readability.note(None, out)
        entries, new_cursor = result
        for entry in entries:
            detail = classify_line(str(entry.get("MESSAGE", "")))
            if detail is None:
                continue
            kind = str(detail.pop("kind"))
            t = entry_time(entry) or now
            if kind == "xid" and self._repeats_xid_79(detail, t):
                continue
            if kind == "xid" and out.boot_id.startswith(str(entry.get("_BOOT_ID", out.boot_id))):
                if detail.get("effect") == "out_of_service":
                    self.gpu_out_of_service = f"Xid {detail.get('code')} ({detail.get('immediate')})"
                elif detail.get("code") == 154 and detail.get("immediate") == "IGNORE":
                    self.gpu_out_of_service = None  # the driver says no recovery action is needed any more
            out.event(kind, detail, t=t)
        if new_cursor and new_cursor != cursor:
            out.writer.set_meta("kernel_cursor", new_cursor)

    def _repeats_xid_79(self, detail: dict[str, Any], t: float) -> bool:
        """An unnumbered "fallen off the bus" line right after the numbered Xid 79 of the same GPU
        is the same loss told twice (older drivers print both): counted once."""
        if detail.get("code") != FALLEN_OFF_XID:
            return False
        slot = pci_slot(str(detail.get("bus") or ""))
        if detail.get("numbered", True):
            self.fallen_off_at[slot] = t
            return False
        recent = [at for s, at in self.fallen_off_at.items() if slot in ("", s)]
        return any(0 <= t - at <= SAME_LOSS_S for at in recent)
