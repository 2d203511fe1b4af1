"""Xid and AER kernel lines, classified by NVIDIA's Xid catalogue.

The expected actions below are copied by hand from NVIDIA's catalogue page, "Analyzing Xid
Errors with the Xid Catalog", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
(Table 1 "Xids": the "Resolution Bucket (Immediate Action)" column; read 2026-12-03), not from
hostcheck's table: the test holds the table to the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostcheck.recording.store import read_recording
from hostcheck.watch.recorder import Clocks, Recorder, WatchConfig
from hostcheck.watch.xid import catalog, classify_line, lookup_xid
from tests.nvml_standin import FakeNvml, laptop_3080ti
from tests.watch_fixtures import JOURNAL_REMOTE, TcpListener, journal_entry, write_journal

CATALOG_URL = "https://web.archive.org/web/20261203000000/https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

# code: (the catalogue's immediate action, its description)
CATALOGUE_SAMPLE = {
    8: ("RESTART_APP", "GPU stopped processing"),
    13: ("RESTART_APP", "Graphics Engine Exception"),
    31: ("RESTART_APP", "GPU memory page fault"),
    38: ("IGNORE", "Driver firmware error"),
    43: ("IGNORE", "GPU stopped processing"),
    46: ("RESET_GPU", "GPU stopped processing"),
    48: ("WORKFLOW_XID_48", "Double Bit ECC Error"),
    54: ("CHECK_MECHANICALS", "Auxiliary power is not connected to the GPU board"),
    62: ("RESET_GPU", "Internal micro-controller halt (newer drivers)"),
    63: ("IGNORE", "GPU memory remapping event"),
    64: ("RESET_GPU", "GPU memory remapping failure"),
    79: ("RESTART_BM", "GPU has fallen off the bus"),
    92: ("IGNORE", "High single-bit ECC error rate"),
    94: ("RESTART_APP", "Contained memory error"),
    95: ("RESET_GPU", "Uncontained memory error"),
    109: ("RESET_GPU", "Context Switch Timeout Error"),
    110: ("RESET_GPU", "Security Fault Error"),
    119: ("RESET_GPU", "GSP RPC Timeout"),
    143: ("RESET_GPU", "GPU Initialization Error"),
    158: ("RESET_GPU", "GPU Fatal Timeout"),
}
# Listed as "Unused" with CONTACT_SUPPORT.
CATALOGUE_UNUSED = (1, 56, 57, 58, 61, 65, 138)
# The catalogue's Fault Resolution Buckets: these take the GPU out of service ("Restart bare
# metal", a GPU reset; Xid 48's row: "A GPU reset or node reboot is needed to clear this error").
OUT_OF_SERVICE = {"RESET_GPU", "RESTART_BM", "WORKFLOW_XID_48"}


def test_catalogue_names_its_source_and_date() -> None:
    source = catalog()["source"]
    assert source["url"] == CATALOG_URL and str(source["checked"]) == "2026-12-03"


@pytest.mark.parametrize("code", sorted(CATALOGUE_SAMPLE))
def test_codes_take_the_catalogues_immediate_action(code: int) -> None:
    action, description = CATALOGUE_SAMPLE[code]
    info = lookup_xid(code)
    assert (info.immediate, info.description, info.in_catalog) == (action, description, True)
    assert info.out_of_service == (action in OUT_OF_SERVICE)


@pytest.mark.parametrize("code", CATALOGUE_UNUSED)
def test_unused_codes_are_listed_as_unused(code: int) -> None:
    info = lookup_xid(code)
    assert info.in_catalog and info.immediate == "CONTACT_SUPPORT" and "Unused" in info.description
    assert not info.out_of_service


def test_every_code_of_the_catalogue_is_in_the_table() -> None:
    data = catalog()
    # The catalogue's Table 1 runs from 1 to 172 without a hole.
    assert set(data["codes"]) | set(data["unused"]) == set(range(1, 173))
    assert not set(data["codes"]) & set(data["unused"])


@pytest.mark.parametrize(
    ("message", "action", "out_of_service"),
    [
        # The catalogue's example string, and the other names it lists as expected values.
        ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "RESTART_BM", True),
        ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "RESET_GPU", True),
        ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", "IGNORE", False),
        ("GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", "RESET_GPU", True),
        ("GPU recovery action changed from 0x0 (None) to 0x4", "RESET_GPU", True),  # the number alone
        ("something else entirely", None, False),
    ],
)
def test_xid_154_takes_its_action_from_its_message(message: str, action: str | None, out_of_service: bool) -> None:
    got = classify_line(f"NVRM: Xid (PCI:0000:01:00): 154, {message}")
    assert got is not None and got["immediate"] == action and got["needs_reboot"] is out_of_service
    if action is None:
        assert got["effect"] == "attention"


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        ("NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
         {"kind": "xid", "code": 79, "needs_reboot": True, "hardware": True, "immediate": "RESTART_BM"}),
        ("NVRM: Xid (PCI:0000:01:00): 13, pid=1234, name=python3, Graphics SM Warp Exception",
         {"kind": "xid", "code": 13, "needs_reboot": False, "hardware": False, "immediate": "RESTART_APP", "effect": "app"}),
        ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
         {"kind": "xid", "code": 63, "needs_reboot": False, "immediate": "IGNORE", "effect": "none"}),
        ("NVRM: Xid (PCI:0000:3b:00): 48, pid=0, An uncorrectable double bit error (DBE) has been detected",
         {"kind": "xid", "code": 48, "needs_reboot": True, "hardware": True}),
        ("NVRM: Xid (0000:01:00): 999, whatever",
         {"kind": "xid", "code": 999, "in_table": False, "effect": "attention", "immediate": None}),
        ("pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0",
         {"kind": "aer", "severity": "corrected", "needs_reboot": False}),
        ("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
         {"kind": "aer", "severity": "uncorrected-fatal", "needs_reboot": True}),
        ("nvidia 0000:01:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)",
         {"kind": "aer", "severity": "uncorrected-nonfatal"}),
        # Without an Xid number (NVIDIA/NVSentinel issue 155, one multi-line kernel record as dmesg printed it):
        # the catalogue's Xid 79, as NVSentinel and gpud count it, marked unnumbered.
        ("NVRM: The NVIDIA GPU 0000:b3:00.0\n               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
         "               NVRM: fallen off the bus and is not responding to commands.",
         {"kind": "xid", "code": 79, "numbered": False, "bus": "0000:b3:00.0", "needs_reboot": True, "hardware": True}),
        ("NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.",
         {"kind": "xid", "code": 79, "numbered": False, "bus": "0000:01:00.0", "effect": "out_of_service"}),
        ("NVRM: fallen off the bus and is not responding to commands.",
         {"kind": "xid", "code": 79, "numbered": False, "bus": ""}),
        ("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus", {"kind": "xid", "code": 79, "numbered": True}),
        ("r8169 0000:03:00.0 eth0: my cable fell off the bus", None),
        ("usb 1-1: new high-speed USB device", None),
    ],
)  # fmt: skip
def test_kernel_lines_are_classified(line: str, expect: dict[str, Any] | None) -> None:
    got = classify_line(line)
    if expect is None:
        assert got is None
    else:
        assert got is not None and {k: got[k] for k in expect} == expect


@pytest.mark.skipif(not JOURNAL_REMOTE.exists(), reason="systemd-journal-remote is not installed (scripts/test installs it)")
def test_out_of_service_xids_take_the_gpu_down_until_recovery(tmp_path: Path) -> None:
    """Through a real journal file: an Xid 63 (IGNORE) leaves the GPU up; an Xid 109 (RESET_GPU)
    takes it out of service; an Xid 154 saying the recovery action went back to None (after a
    GPU reset) puts it back."""
    import time

    boot = "a" * 32
    now = time.time()
    lines = [
        "NVRM: Xid (PCI:0000:01:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
        "NVRM: Xid (PCI:0000:01:00): 109, pid=1896, Ch 00000008, errorString CTX SWITCH TIMEOUT",
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
    ]
    (tmp_path / "boot_id").write_text("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa\n")
    states = []
    for n in range(1, len(lines) + 1):
        journal = write_journal(tmp_path / f"j{n}.journal", [journal_entry(boot, now - 30 + i, m) for i, m in enumerate(lines[:n])])
        states.append(record_one_step(tmp_path, journal, tmp_path / f"w{n}.db").samples[0].gpu_ok)
    assert states == [True, False, True]


def record_one_step(tmp_path: Path, journal: Path, db: Path) -> Any:
    """One recorder step over a real journal file (boot id file at tmp_path/boot_id)."""
    listener = TcpListener()
    try:
        config = WatchConfig(db=db, interval_s=60, targets=[f"tcp:127.0.0.1:{listener.port}"],
                             probe_timeout_s=0.5, journal_command=["journalctl", "--file", str(journal)],
                             dpkg_log=tmp_path / "dpkg.log", nvml=FakeNvml([laptop_3080ti()]),
                             boot_id_path=tmp_path / "boot_id", container_mark=tmp_path / "no-mark",
                             power_supply_dir=tmp_path / "none", upsc_command=[str(tmp_path / "no-upsc")])  # fmt: skip
        rec = Recorder(config, clocks=Clocks(), log=lambda _m: None)
        rec.step()
        rec.writer.close()
        rec.prober.close()
    finally:
        listener.close()
    return read_recording(db)


@pytest.mark.skipif(not JOURNAL_REMOTE.exists(), reason="systemd-journal-remote is not installed (scripts/test installs it)")
def test_a_gpu_lost_without_an_xid_is_counted_once(tmp_path: Path) -> None:
    """Through a real journal file: an Xid 79 followed a second later by the same GPU's unnumbered
    "fallen off the bus" line (older drivers print both) is one loss; another GPU's unnumbered
    line alone is a loss of its own, and takes the GPU out of service."""
    import time

    boot = "a" * 32
    now = time.time()
    lines = [
        "NVRM: Xid (PCI:0000:44:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "NVRM: GPU 0000:44:00.0: GPU has fallen off the bus.",
        "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands.",
    ]
    (tmp_path / "boot_id").write_text("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa\n")
    journal = write_journal(tmp_path / "j.journal", [journal_entry(boot, now - 30 + i, m) for i, m in enumerate(lines)])
    recording = record_one_step(tmp_path, journal, tmp_path / "w.db")
    losses = [(e.detail["bus"], e.detail["numbered"]) for e in recording.events if e.kind == "xid"]
    assert losses == [("0000:44:00", True), ("0000:b3:00.0", False)]
    assert recording.samples[0].gpu_ok is False
