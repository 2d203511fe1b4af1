"""GPU facts against the real thing: every GPU fact of `hostcheck facts` next to what
`nvidia-smi -q -x` reports for the same card, and each difference printed.

Run on a machine with an NVIDIA GPU, from the repository root:
    .venv/bin/python bench/gpu_truth.py                 # collect both now
    .venv/bin/python bench/gpu_truth.py --facts F.json --xml smi.xml   # compare saved outputs

Exit status: 0 every fact agrees, 1 some differ (each printed), 2 nothing to compare
(no nvidia-smi, unreadable input). Readings that move by themselves between the two
queries (power draw, temperature, VRAM in use) are compared with a tolerance.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET  # nvidia-smi's own output, parsed locally
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TIMEOUT_S = 30
# fact -> allowed absolute difference for readings that change between two queries
TOLERANCE = {"power_draw_w": 15.0, "temperature_c": 3.0, "vram_used_mib": 256.0}
THROTTLE_TAGS = {
    "clocks_event_reason_gpu_idle": "gpu_idle", "clocks_throttle_reason_gpu_idle": "gpu_idle",
    "clocks_event_reason_applications_clocks_setting": "applications_clocks_setting",
    "clocks_throttle_reason_applications_clocks_setting": "applications_clocks_setting",
    "clocks_event_reason_sw_power_cap": "sw_power_cap", "clocks_throttle_reason_sw_power_cap": "sw_power_cap",
    "clocks_event_reason_hw_slowdown": "hw_slowdown", "clocks_throttle_reason_hw_slowdown": "hw_slowdown",
    "clocks_event_reason_hw_thermal_slowdown": "hw_thermal_slowdown",
    "clocks_throttle_reason_hw_thermal_slowdown": "hw_thermal_slowdown",
    "clocks_event_reason_hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "clocks_throttle_reason_hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "clocks_event_reason_sw_thermal_slowdown": "sw_thermal_slowdown",
    "clocks_throttle_reason_sw_thermal_slowdown": "sw_thermal_slowdown",
    "clocks_event_reason_sync_boost": "sync_boost", "clocks_throttle_reason_sync_boost": "sync_boost",
    "clocks_event_reason_display_clock_setting": "display_clock_setting",
    "clocks_throttle_reason_display_clock_setting": "display_clock_setting",
}  # fmt: skip


def _text(node: ET.Element | None, *paths: str) -> str | None:
    """The first of ``paths`` that exists under ``node`` and is not N/A."""
    if node is None:
        return None
    for path in paths:
        found = node.find(path)
        if found is not None and found.text and found.text.strip() not in ("N/A", "[N/A]", "Not Supported", "[Not Supported]"):
            return found.text.strip()
    return None


def _number(text: str | None) -> float | None:
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(match.group(1)) if match else None


def _flag(text: str | None) -> bool | None:
    return None if text is None else text.strip().lower() in ("enabled", "active", "yes", "on")


def _bus_id(text: str | None) -> str | None:
    """'00000000:01:00.0' in one spelling, whatever case or domain width each tool uses."""
    if not text:
        return None
    parts = text.strip().lower().split(":")
    if len(parts) == 3:
        return f"{int(parts[0], 16):08x}:{parts[1]}:{parts[2]}"
    return text.strip().lower()


def parse_smi_xml(text: str) -> dict[str, Any]:
    """`nvidia-smi -q -x` -> {'driver_version', 'cuda_version', 'gpus': {bus_id: {fact: value}}}."""
    root = ET.fromstring(text)  # local nvidia-smi output, not untrusted network input
    gpus: dict[str, dict[str, Any]] = {}
    for gpu in root.findall("gpu"):
        bus = _bus_id(gpu.get("id") or _text(gpu, "pci/pci_bus_id"))
        power = gpu.find("gpu_power_readings")
        if power is None:
            power = gpu.find("power_readings")
        reasons = gpu.find("clocks_event_reasons")
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
        active = sorted(
            THROTTLE_TAGS[child.tag] for child in (reasons if reasons is not None else [])
            if child.tag in THROTTLE_TAGS and (child.text or "").strip() == "Active"
        )
        width = _text(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")
        width_max = _text(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")
        gpus[bus or f"gpu{len(gpus)}"] = {
            "name": _text(gpu, "product_name"),
            # "Ada Lovelace" in nvidia-smi is "ada" in NVML's naming
            "architecture": ((_text(gpu, "product_architecture") or "").split() or [None])[0],
            "uuid": _text(gpu, "uuid"),
            "serial": _text(gpu, "serial"),
            "pci_bus_id": bus,
            "vram_total_mib": _number(_text(gpu, "fb_memory_usage/total")),
            "vram_used_mib": _number(_text(gpu, "fb_memory_usage/used")),
            "power_limit_w": _number(_text(power, "enforced_power_limit", "current_power_limit", "power_limit")),
            "power_default_w": _number(_text(power, "default_power_limit")),
            "power_min_w": _number(_text(power, "min_power_limit")),
            "power_max_w": _number(_text(power, "max_power_limit")),
            "power_draw_w": _number(_text(power, "instant_power_draw", "power_draw", "average_power_draw")),
            "temperature_c": _number(_text(gpu, "temperature/gpu_temp")),
            "slowdown_temp_c": _number(_text(gpu, "temperature/gpu_temp_slow_threshold")),
            "pcie_gen_current": _number(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
            "pcie_gen_max": _number(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
            "pcie_width_current": _number(width),
            "pcie_width_max": _number(width_max),
            "ecc_enabled": _flag(_text(gpu, "ecc_mode/current_ecc")),
            "persistence_mode": _flag(_text(gpu, "persistence_mode")),
            "display_active": _flag(_text(gpu, "display_active")),
            "mig_mode": _flag(_text(gpu, "mig_mode/current_mig")),
            "throttle_reasons": active if reasons is not None else None,
        }
    return {"driver_version": _text(root, "driver_version"), "cuda_version": _text(root, "cuda_version"), "gpus": gpus}


def _same(key: str, ours: Any, theirs: Any) -> bool:
    if isinstance(ours, bool) or isinstance(theirs, bool):
        return ours == theirs
    if isinstance(ours, (int, float)) and isinstance(theirs, (int, float)):
        return abs(float(ours) - float(theirs)) <= TOLERANCE.get(key, 0.51)
    if key == "throttle_reasons" and isinstance(ours, list) and isinstance(theirs, list):
        # gpu_idle flips with the load between the two queries; the others must agree.
        return sorted(set(ours) - {"gpu_idle"}) == sorted(set(theirs) - {"gpu_idle"})
    if isinstance(ours, str) and isinstance(theirs, str):
        return ours.strip().lower() == theirs.strip().lower()
    if isinstance(ours, dict) and theirs is not None:
        return False  # hostcheck could not read what nvidia-smi could
    return ours == theirs


def compare(facts: dict[str, Any], smi: dict[str, Any], compute_caps: dict[str, str] | None = None) -> list[str]:
    """One line per difference between hostcheck's GPU facts and nvidia-smi's report."""
    gpu = facts.get("gpu", {})
    out: list[str] = []
    for key, theirs in (("driver_version", smi["driver_version"]), ("cuda_driver_version", smi["cuda_version"])):
        ours = gpu.get(key)
        if not _same(key, ours, theirs):
            out.append(f"{key}: hostcheck {ours!r}, nvidia-smi {theirs!r}")
    devices = gpu.get("devices")
    if not isinstance(devices, list):
        return out + [f"gpu.devices: hostcheck has none ({devices!r}); nvidia-smi lists {len(smi['gpus'])}"]
    by_bus = {_bus_id(d.get("pci_bus_id")) if isinstance(d.get("pci_bus_id"), str) else None: d for d in devices}
    for bus, theirs in smi["gpus"].items():
        ours = by_bus.pop(bus, None)
        if ours is None:
            out.append(f"GPU {bus}: in nvidia-smi, missing from hostcheck")
            continue
        label = f"GPU {ours.get('index')} ({bus})"
        for key, value in theirs.items():
            mine = ours.get(key)
            if value is None and (mine is None or isinstance(mine, dict)):
                continue  # neither tool can read it (N/A), or hostcheck says why not
            if not _same(key, mine, value):
                out.append(f"{label} {key}: hostcheck {mine!r}, nvidia-smi {value!r}")
        cap = (compute_caps or {}).get(bus)
        if cap is not None and not _same("compute_capability", ours.get("compute_capability"), cap):
            out.append(f"{label} compute_capability: hostcheck {ours.get('compute_capability')!r}, nvidia-smi {cap!r}")
    for bus, ours in by_bus.items():
        out.append(f"GPU {ours.get('index')} ({bus}): in hostcheck, missing from nvidia-smi")
    return out


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout


def _compute_caps() -> dict[str, str]:
    """nvidia-smi's compute capability per bus id (not part of -q -x on every driver)."""
    try:
        text = _run(["nvidia-smi", "--query-gpu=pci.bus_id,compute_cap", "--format=csv,noheader"])
    except (OSError, subprocess.SubprocessError):
        return {}
    caps = {}
    for line in text.splitlines():
        bus, _, cap = line.partition(",")
        if cap.strip():
            caps[_bus_id(bus) or bus] = cap.strip()
    return caps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, help="a saved `hostcheck facts` file (default: collect now)")
    parser.add_argument("--xml", type=Path, help="a saved `nvidia-smi -q -x` output (default: run it now)")
    args = parser.parse_args(argv)
    try:
        if args.facts:
            facts = json.loads(args.facts.read_text())
        else:
            facts = json.loads(_run([sys.executable, "-m", "hostcheck.cli", "facts", "--offline"]))
        xml_text = args.xml.read_text() if args.xml else _run(["nvidia-smi", "-q", "-x"])
        smi = parse_smi_xml(xml_text)
    except (OSError, subprocess.SubprocessError, ValueError, ET.ParseError) as exc:
        print(f"gpu_truth: nothing to compare: {exc}", file=sys.stderr)
        return 2
    caps = {} if args.xml else _compute_caps()
    differences = compare(facts, smi, caps)
    compared = len(smi["gpus"])
    for line in differences:
        print(line)
    print(f"gpu_truth: {compared} GPU(s), {len(differences)} difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
