"""NVIDIA Xid and PCIe AER kernel-log lines, classified by the catalogue in xid_catalog.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CATALOG_PATH = Path(__file__).with_name("xid_catalog.yaml")
REBOOT_BUCKETS = frozenset({"RESET_GPU", "RESTART_BM"})
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d{1,4}),")
AER_RE = re.compile(r"\bAER: (?P<what>(?:Multiple )?(?:Corrected|Uncorrected \((?:Non-)?Fatal\)) error)")
AER_SEVERITY_RE = re.compile(r"PCIe Bus Error: severity=(?P<sev>Corrected|Uncorrected \((?:Non-)?Fatal\)|Uncorrectable \((?:Non-)?Fatal\))")


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str
    immediate: str
    hardware: bool
    known: bool

    @property
    def needs_reboot(self) -> bool:
        return self.immediate in REBOOT_BUCKETS


@cache
def catalog() -> dict[str, Any]:
    data = yaml.safe_load(CATALOG_PATH.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("codes"), dict):
        raise ValueError(f"{CATALOG_PATH}: no 'codes' table")
    return data


def lookup_xid(code: int) -> XidInfo:
    row = catalog()["codes"].get(code)
    if row is None:
        # Unknown to this table: treated as needing attention, never as harmless.
        return XidInfo(code, "not in hostcheck's Xid table: look it up in NVIDIA's catalogue", "CONTACT_SUPPORT", True, False)
    return XidInfo(code, str(row["name"]), str(row["immediate"]), bool(row["hardware"]), True)


def classify_line(message: str) -> dict[str, Any] | None:
    """An event detail for an Xid or AER line, or None for any other kernel line."""
    text = message[:2000]
    m = XID_RE.search(text)
    if m:
        info = lookup_xid(int(m.group("code")))
        return {
            "kind": "xid", "code": info.code, "bus": m.group("bus"), "name": info.name,
            "immediate": info.immediate, "needs_reboot": info.needs_reboot, "hardware": info.hardware,
            "in_table": info.known, "line": text[:300],
        }  # fmt: skip
    m = AER_RE.search(text) or AER_SEVERITY_RE.search(text)
    if m:
        what = (m.groupdict().get("what") or m.groupdict().get("sev") or "").lower()
        fatal = "fatal" in what and "non-fatal" not in what
        corrected = "corrected" in what and "uncorrect" not in what
        return {
            "kind": "aer",
            "severity": "corrected" if corrected else ("uncorrected-fatal" if fatal else "uncorrected-nonfatal"),
            # Corrected errors are recovered by the link but point at signal integrity (riser,
            # slot, power); uncorrected ones at the device or link itself.
            "hardware": True,
            "needs_reboot": fatal,
            "line": text[:300],
        }
    return None
