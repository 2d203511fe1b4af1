"""NVIDIA Xid and PCIe AER kernel-log lines, classified by NVIDIA's Xid catalogue
(the catalogue is data: xid_catalog.yaml, with its source and the date it was read).

Some drivers report a GPU that fell off the bus without an Xid number ("NVRM: The NVIDIA GPU
0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus and is not
responding to commands."; NVIDIA/NVSentinel issue 155, leptonai/gpud issue 604): such a line is
the catalogue's Xid 79 (what both projects count it as) with ``numbered`` false, so the
recorder and the audit count the loss whatever the driver printed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hostcheck import yaml_loader
from hostcheck.models import SourceEntry

CATALOG_PATH = Path(__file__).with_name("xid_catalog.yaml")
CATALOG_SOURCES = ("source", "recovery_action_source", "aer_source")
EFFECTS = frozenset({"out_of_service", "app", "attention", "none", "by_message"})
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d{1,4}),")
RECOVERY_RE = re.compile(r"recovery action changed from .*? to 0x(?P<number>[0-9A-Fa-f]+)(?: \((?P<name>[^)]*)\))?")
# The bus as the unnumbered message names it ("0000:b3:00.0", "PCI:0000:01:00"), when it does.
FALLEN_RE = re.compile(
    r"NVRM: (?:The NVIDIA GPU |GPU (?:at )?)?(?:PCI:)?(?P<bus>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)?"
    r".{0,200}?\bfallen off the bus", re.S)
FALLEN_OFF_XID = 79
AER_RE = re.compile(r"\bAER: (?P<what>(?:Multiple )?(?:Corrected|Uncorrected \((?:Non-)?Fatal\)) error)")
AER_SEVERITY_RE = re.compile(r"PCIe Bus Error: severity=(?P<sev>Corrected|Uncorrected \((?:Non-)?Fatal\)|Uncorrectable \((?:Non-)?Fatal\))")


@dataclass(frozen=True)
class XidInfo:
    code: int
    mnemonic: str
    description: str
    immediate: str | None  # the catalogue's immediate action, word for word (None: the row gives none)
    effect: str  # what the recorder does with it: out_of_service | app | attention | none
    hardware: bool  # the catalogue's text puts the cause in the hardware (hostcheck's reading)
    in_catalog: bool

    @property
    def out_of_service(self) -> bool:
        """The GPU takes no work until it is reset or the machine rebooted."""
        return self.effect == "out_of_service"


@cache
def catalog() -> dict[str, Any]:
    data = yaml_loader.safe_load(CATALOG_PATH.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("codes"), dict) or not isinstance(data.get("buckets"), dict):
        raise ValueError(f"{CATALOG_PATH}: no 'codes' or 'buckets' table")
    for key in CATALOG_SOURCES:
        SourceEntry.model_validate(data.get(key))
    for name, bucket in data["buckets"].items():
        if bucket.get("effect") not in EFFECTS:
            raise ValueError(f"{CATALOG_PATH}: bucket {name} has no known effect")
    return data


def _effect(bucket: str | None) -> str:
    if bucket is None:
        return "attention"  # the catalogue's row names no action: the owner should look
    row = catalog()["buckets"].get(bucket)
    return "attention" if row is None else str(row["effect"])


def lookup_xid(code: int, message: str = "") -> XidInfo:
    """The catalogue's row for ``code``; Xid 154 takes its action from its own message."""
    data = catalog()
    row = data["codes"].get(code)
    hardware = code in data.get("hardware", {})
    if row is None:
        if code in data.get("unused", []):
            return XidInfo(code, "", "Unused in the catalogue (deprecated, or V100 and older)", "CONTACT_SUPPORT",
                           "attention", hardware, True)
        # Unknown to the catalogue as read: never treated as harmless.
        return XidInfo(code, "", f"not in NVIDIA's Xid catalogue as read on {data['source']['checked']}", None,
                       "attention", hardware, False)
    immediate = row["immediate"]
    effect = _effect(immediate)
    if effect == "by_message":
        immediate, effect = _recovery_action(message)
    return XidInfo(code, str(row["mnemonic"]), str(row["description"]), immediate, effect, hardware, True)


def _recovery_action(message: str) -> tuple[str | None, str]:
    """Xid 154: the bucket of the recovery action its message names (by name, else by number)."""
    m = RECOVERY_RE.search(message)
    if m is None:
        return None, "attention"
    actions = catalog().get("recovery_actions", {})
    name = (m.group("name") or "").strip()
    row = actions.get(name) or next((r for r in actions.values() if r["number"] == int(m.group("number"), 16)), None)
    if row is None:
        return None, "attention"
    return str(row["bucket"]), _effect(str(row["bucket"]))


def pci_slot(bus: str) -> str:
    """'PCI:0000:01:00' and '0000:01:00.0' -> '0000:01:00': the two spellings of one GPU."""
    text = bus.lower().removeprefix("pci:")
    return text.rsplit(".", 1)[0] if text.count(":") == 2 and "." in text else text


def _xid_detail(code: int, bus: str, text: str, numbered: bool) -> dict[str, Any]:
    info = lookup_xid(code, text)
    return {
        "kind": "xid", "code": info.code, "bus": bus, "name": info.description,
        "mnemonic": info.mnemonic, "immediate": info.immediate, "effect": info.effect,
        "needs_reboot": info.out_of_service, "hardware": info.hardware, "in_table": info.in_catalog,
        "numbered": numbered, "line": text[:300],
    }  # fmt: skip


def classify_line(message: str) -> dict[str, Any] | None:
    """An event detail for an Xid or AER line, or None for any other kernel line."""
    text = message[:2000]
    m = XID_RE.search(text)
    if m:
        return _xid_detail(int(m.group("code")), m.group("bus"), text, numbered=True)
    m = FALLEN_RE.search(text)
    if m:
        return _xid_detail(FALLEN_OFF_XID, m.group("bus") or "", text, numbered=False)
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
