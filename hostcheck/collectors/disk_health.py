"""Drive health from smartmontools: ``smartctl --scan`` then ``smartctl --json -H -A -i`` per drive.

Only the fields the STO-107x checks read are kept: NVMe's critical warning, available spare and
its threshold, percentage used and media errors; SATA's reallocated and pending sectors (raw
values: their thresholds are often missing, so the drive's own FAIL column says nothing).
Reading SMART opens the raw device, so it needs root; a drive emulated by a hypervisor answers
for the emulation, not for the storage behind it, and is marked so.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from hostcheck.collectors._run import run_command
from hostcheck.collectors.storage import vm_guest
from hostcheck.facts import Unknown

SECTION = "storage"
TIMEOUT = 10

MAX_DRIVES = 16
MAX_OUTPUT = 1 << 20
PER_DRIVE_S = 4.0
PROTOCOLS = ("NVMe", "ATA", "SCSI")
ATA_REALLOCATED, ATA_PENDING = 5, 197
EMULATED_MODELS = ("QEMU", "VBOX", "VMware", "Virtual")
"""Model names hypervisors give their emulated drives (QEMU's NVMe is "QEMU NVMe Ctrl")."""
# smartctl's exit status is a bit mask (smartctl(8), RETURN VALUES): bit 1 the device could not
# be opened, bit 2 a SMART command failed. The higher bits describe the drive, not the run.
_OPEN_FAILED, _COMMAND_FAILED = 0x02, 0x04
NVME_FIELDS = ("critical_warning", "available_spare", "available_spare_threshold", "percentage_used",
               "media_errors")
ATA_FIELDS = ("reallocated_sectors", "pending_sectors")


def _count(value: Any, what: str, top: int = 2**63 - 1) -> int | Unknown:
    """A non-negative whole number as smartctl writes it; anything else is not a reading."""
    if type(value) is int and 0 <= value <= top:
        return value
    return Unknown(f"smartctl gave no usable {what} ({str(value)[:40]!r})")


def _messages(data: dict[str, Any]) -> str:
    msgs = data.get("smartctl", {}).get("messages") if isinstance(data.get("smartctl"), dict) else None
    texts = [str(m.get("string"))[:200] for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []
    return "; ".join(texts[:3])


def _load(text: str) -> dict[str, Any] | Unknown:
    if len(text) > MAX_OUTPUT:
        return Unknown(f"smartctl printed more than {MAX_OUTPUT} bytes: not read")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Unknown(f"smartctl's output is not JSON (truncated or not --json): {str(exc)[:80]}")
    if not isinstance(data, dict) or not isinstance(data.get("smartctl"), dict):
        return Unknown("smartctl's output is not smartctl JSON (no 'smartctl' object)")
    return data


def parse_scan(text: str) -> list[dict[str, str]] | Unknown:
    """``smartctl --scan --json`` -> [{name, type}] (at most MAX_DRIVES)."""
    data = _load(text)
    if isinstance(data, Unknown):
        return data
    devices = data.get("devices", [])
    if not isinstance(devices, list):
        return Unknown("smartctl --scan gave no device list")
    out = []
    for dev in devices[:MAX_DRIVES]:
        if isinstance(dev, dict) and isinstance(dev.get("name"), str) and isinstance(dev.get("type"), str):
            name, kind = dev["name"], dev["type"]
            if name.startswith("/dev/") and len(name) < 64 and kind.replace(",", "").isalnum() and len(kind) < 32:
                out.append({"name": name, "type": kind})
    return out


def _unreadable(device: str, reason: Unknown) -> dict[str, Any]:
    return {"device": device, "protocol": reason, "model": reason, "emulated_by": None, "passed": reason,
            **dict.fromkeys(NVME_FIELDS + ATA_FIELDS, reason)}


def parse_drive(text: str, exit_status: int, device: str, vm: str | None = None) -> dict[str, Any]:
    """One drive's ``smartctl --json -H -A -i`` -> its declared facts. Fields of the other
    protocol are null; fields the drive does not report are unknown, with the reason."""
    data = _load(text)
    if isinstance(data, Unknown):
        return _unreadable(device, data)
    if exit_status & (_OPEN_FAILED | _COMMAND_FAILED):
        said = _messages(data) or f"exit status {exit_status}"
        return _unreadable(device, Unknown(f"smartctl could not read {device}: {said}"))
    info = data.get("device")
    said_protocol = info.get("protocol") if isinstance(info, dict) else None
    protocol = said_protocol if said_protocol in PROTOCOLS else None
    model = data.get("model_name") if isinstance(data.get("model_name"), str) else data.get("scsi_model_name")
    model = model[:80] if isinstance(model, str) else Unknown("smartctl reported no model")
    status = data.get("smart_status")
    passed = status.get("passed") if isinstance(status, dict) else None
    drive: dict[str, Any] = {
        "device": device,
        "protocol": protocol or Unknown(f"smartctl reported no known protocol for {device}"),
        "model": model,
        "emulated_by": _emulated(model, vm),
        "passed": passed if isinstance(passed, bool) else Unknown("smartctl reported no overall SMART verdict"),
        **dict.fromkeys(NVME_FIELDS + ATA_FIELDS, None),
    }
    if protocol == "NVMe":
        log = data.get("nvme_smart_health_information_log")
        if not isinstance(log, dict):
            missing = Unknown("smartctl returned no NVMe health log")
            drive.update(dict.fromkeys(NVME_FIELDS, missing))
        else:
            tops = {"critical_warning": 255, "available_spare": 255, "available_spare_threshold": 255,
                    "percentage_used": 255}
            drive.update({f: _count(log.get(f), f.replace("_", " "), tops.get(f, 2**63 - 1)) for f in NVME_FIELDS})
    elif protocol == "ATA":
        drive["reallocated_sectors"] = _ata_raw(data, ATA_REALLOCATED, "Reallocated_Sector_Ct")
        drive["pending_sectors"] = _ata_raw(data, ATA_PENDING, "Current_Pending_Sector")
    return drive


def _ata_raw(data: dict[str, Any], attr_id: int, name: str) -> int | Unknown:
    table = data.get("ata_smart_attributes", {})
    rows = table.get("table") if isinstance(table, dict) else None
    if not isinstance(rows, list):
        return Unknown("smartctl returned no ATA attribute table")
    for row in rows:
        if isinstance(row, dict) and row.get("id") == attr_id:
            raw = row.get("raw")
            return _count(raw.get("value") if isinstance(raw, dict) else None, f"raw value of {name}")
    return Unknown(f"the drive does not report attribute {attr_id} ({name})")


def _emulated(model: str | Unknown, vm: str | None) -> str | None:
    """The hypervisor whose emulated drive this is, else None (a passed-through drive inside a
    guest answers for itself, so only an emulated model name counts)."""
    if isinstance(model, str) and model.startswith(EMULATED_MODELS):
        return vm or "a hypervisor"
    return None


def collect(ctx: Any) -> dict[str, Any]:
    return {"smart": {"drives": drives()}}


def drives() -> list[dict[str, Any]] | Unknown:
    if os.geteuid() != 0:
        return Unknown("reading a drive's SMART data opens the raw device (needs root)")
    scan = run_command(["smartctl", "--scan", "--json"], timeout=PER_DRIVE_S)
    if isinstance(scan, Unknown):
        return Unknown(f"{scan.reason} (smartmontools)")
    found = parse_scan(scan.stdout)
    if isinstance(found, Unknown):
        return found
    vm = vm_guest()
    if not found:
        where = f"inside a {vm} guest, " if vm else ""
        return Unknown(f"{where}smartctl found no drive with SMART data (virtio and Xen disks have none)")
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + TIMEOUT - PER_DRIVE_S
    for dev in found:
        if time.monotonic() > deadline:
            out.append(_unreadable(dev["name"], Unknown(f"not read: the other drives took the {TIMEOUT}s allowed")))
            continue
        res = run_command(["smartctl", "--json", "-H", "-A", "-i", "-d", dev["type"], dev["name"]],
                          timeout=PER_DRIVE_S)
        if isinstance(res, Unknown):
            out.append(_unreadable(dev["name"], res))
        else:
            out.append(parse_drive(res.stdout, res.returncode, dev["name"], vm))
    return out
