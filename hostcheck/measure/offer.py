"""The offer a Vast renter would see, built from the audit's facts and two bounded measurements
(``disk_bw`` and, when it was run, the speed test), each field named and defined as Vast's own
offer documentation defines it and labelled with where its value comes from.

Pure: the facts and the measurements come in; nothing here touches the system.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hostcheck.collectors.disk_bw import VAST_JOB_CHECKED, VAST_JOB_SOURCE, VAST_JOB_URL, DiskBandwidth
from hostcheck.facts import Unknown
from hostcheck.measure.power_estimate import PowerEstimate
from hostcheck.models import InboundResult


class Label(StrEnum):
    MEASURED = "measured"
    SYSTEM = "from the system"
    NOT_MEASURED = "not measured"
    NOT_BEFORE_LISTING = "not measurable before listing"
    UNKNOWN = "unknown"


CHECKED = "2026-12-02"
CLI_DOC = (
    "vast-ai/docs cli/reference/search-offers.mdx",
    "https://github.com/vast-ai/docs/blob/c624622622496828c1ae58edec481bba1f5d675d/cli/reference/search-offers.mdx",
)
API_DOC = (
    "vast-ai/docs api-reference/openapi/yaml/search_offers.yaml",
    "https://github.com/vast-ai/docs/blob/c624622622496828c1ae58edec481bba1f5d675d/api-reference/openapi/yaml/search_offers.yaml",
)
HOST_SCRIPT = (VAST_JOB_SOURCE, VAST_JOB_URL, VAST_JOB_CHECKED)
SELF_TEST = (
    "vast-ai/vast-cli vastai/cli/self_test/machine_diagnostics.py",
    "https://github.com/vast-ai/vast-cli/tree/55679830a2c2adcf5c7fad08bf08717a9591062a/vastai/cli/self_test",
)
SPEEDTEST_HINT = "not measured: run with --probe URL --speedtest (your `hostcheck probe-server` outside this network)"
# PCIe payload ceiling per lane and direction, GB/s (after line encoding: 8b/10b to gen 2, 128b/130b from gen 3).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def _source(doc: tuple[str, ...]) -> str:
    """``title <url> (checked DATE)``; the date is the document's own when it has one."""
    return f"{doc[0]} <{doc[1]}> (checked {doc[2] if len(doc) > 2 else CHECKED})"


@dataclass(frozen=True)
class OfferField:
    name: str
    value: Any  # None when the value is not known
    unit: str
    label: Label
    how: str
    definition: str
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "value": self.value, "unit": self.unit, "label": str(self.label),
            "how": self.how, "definition": self.definition, "source": self.source,
        }  # fmt: skip


@dataclass(frozen=True)
class SelfTestCheck:
    """One of the thresholds Vast's self-test checks on the offer before it rents the machine."""

    field: str
    actual: float | None
    operator: str
    required: float
    unit: str
    status: str  # "pass" | "fail" | "unknown"

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class Offer:
    fields: list[OfferField]
    power: PowerEstimate | None
    disk: DiskBandwidth | None
    notes: list[str] = field(default_factory=list)
    self_test: list[SelfTestCheck] = field(default_factory=list)

    def field(self, name: str) -> OfferField:
        return next(f for f in self.fields if f.name == name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "platform": "vast",
            "fields": [f.as_dict() for f in self.fields],
            "power": None if self.power is None else self.power.as_dict(),
            "disk_bw_run": None if self.disk is None else self.disk.as_dict(),
            "self_test": {"source": _source(SELF_TEST), "checks": [c.as_dict() for c in self.self_test]},
            "notes": list(self.notes),
        }


def _get(node: Any, *path: str | int) -> Any:
    for part in path:
        if isinstance(node, Unknown):
            return node
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return Unknown("not collected")
            node = node[part]
        elif isinstance(node, dict):
            if part not in node:
                return Unknown(f"no {part} in the facts (not collected)")
            node = node[part]
        else:
            return Unknown("not collected")
    return node


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _system_field(name: str, value: Any, unit: str, how: str, definition: str, doc: tuple[str, str]) -> OfferField:
    if isinstance(value, Unknown) or value is None:
        reason = value.reason if isinstance(value, Unknown) else "not reported"
        return OfferField(name, None, unit, Label.UNKNOWN, f"unknown: {reason}", definition, _source(doc))
    return OfferField(name, value, unit, Label.SYSTEM, how, definition, _source(doc))


def _devices(facts: dict[str, Any]) -> list[dict[str, Any]] | Unknown:
    devices = _get(facts, "gpu", "devices")
    if isinstance(devices, Unknown):
        return devices
    if not isinstance(devices, list):
        return Unknown("no GPU device list in the facts")
    return [d for d in devices if isinstance(d, dict)]


def _per_gpu(devices: list[dict[str, Any]] | Unknown, key: str, check: Any = _number) -> Any:
    """The value every GPU shares (a renter sees one per-GPU figure), or Unknown saying why not."""
    if isinstance(devices, Unknown):
        return devices
    if not devices:
        return Unknown("NVML sees no NVIDIA GPU")
    values = [d.get(key, Unknown(f"no {key}")) for d in devices]
    for v in values:
        if isinstance(v, Unknown):
            return v
        if not check(v):
            return Unknown(f"{key} is not a usable value: {str(v)[:40]!r}")
    distinct = sorted(set(values), key=str)
    if len(distinct) == 1:
        return distinct[0]
    # Mixed GPUs: Vast lists per-GPU figures; the smallest is what a renter of any GPU can count on.
    return min(distinct) if all(_number(v) for v in distinct) else ", ".join(str(v) for v in distinct)


def _gpu_fields(facts: dict[str, Any]) -> list[OfferField]:
    devices = _devices(facts)
    out = []
    names = _per_gpu(devices, "name", lambda v: isinstance(v, str) and bool(v))
    out.append(_system_field("gpu_name", names, "", "NVML device name (Vast shortens it, e.g. RTX_3090)",
                             "GPU model name", CLI_DOC))
    count = devices if isinstance(devices, Unknown) else len(devices)
    out.append(_system_field("num_gpus", count, "", "NVML device count", "number of GPUs", CLI_DOC))
    out.append(_system_field("gpu_ram", _per_gpu(devices, "vram_total_mib"), "MiB",
                             "NVML total memory (the API's 'MB' values are MiB: 24576 for a 24 GiB card)",
                             "per GPU RAM (CLI: in GB; API: in MB)", API_DOC))
    out.append(_system_field("gpu_max_power", _per_gpu(devices, "power_limit_w"), "W",
                             "NVML enforced power limit", "GPU power limit (watts)", CLI_DOC))
    cc = _per_gpu(devices, "compute_capability", lambda v: isinstance(v, str) and v.replace(".", "").isdigit())
    cc_value = cc if isinstance(cc, Unknown) else _compute_cap(cc)
    out.append(_system_field("compute_cap", cc_value, "", "NVML CUDA compute capability x 100",
                             "CUDA compute capability x100 (e.g. 650 for 6.5, 700 for 7.0)", CLI_DOC))
    out.append(_system_field("cuda_max_good", _get(facts, "gpu", "cuda_driver_version"), "",
                             "NVML: the newest CUDA the installed driver supports",
                             "Maximum supported CUDA version (CLI: cuda_vers, based on driver version)", API_DOC))
    out.append(_system_field("driver_version", _get(facts, "gpu", "driver_version"), "", "NVML driver version",
                             "machine's nvidia/amd driver version as 3 digit string ex. \"535.86.05\"", CLI_DOC))
    display = _per_gpu(devices, "display_active", lambda v: isinstance(v, bool))
    out.append(_system_field("gpu_display_active", display, "", "NVML display active",
                             "True if the GPU has a display attached", CLI_DOC))
    out.append(_pci_field(devices))
    out.append(_pcie_bw_field(devices))
    return out


def _compute_cap(text: str) -> int | Unknown:
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return Unknown(f"unreadable compute capability {text!r}")
    return int(major) * 100 + int(minor) * 10


def _pci_field(devices: list[dict[str, Any]] | Unknown) -> OfferField:
    gen = _per_gpu(devices, "pcie_gen_max")
    return _system_field("pci_gen", gen, "", "NVML maximum PCIe link generation of the GPU and slot",
                         "PCIE generation", CLI_DOC)


def _pcie_bw_field(devices: list[dict[str, Any]] | Unknown) -> OfferField:
    definition = "PCIE bandwidth (CPU to GPU), GB/s; Vast's self-test wants more than 2.85"
    gen, width = _per_gpu(devices, "pcie_gen_max"), _per_gpu(devices, "pcie_width_current")
    if isinstance(gen, Unknown) or isinstance(width, Unknown) or int(gen) not in PCIE_LANE_GBPS:
        reason = gen.reason if isinstance(gen, Unknown) else width.reason if isinstance(width, Unknown) else "unknown generation"
        return OfferField("pcie_bw", None, "GB/s", Label.NOT_MEASURED,
                          f"not measured: Vast times pinned host-to-GPU copies (CUDA bandwidthTest); link unknown ({reason})",
                          definition, _source(SELF_TEST))
    ceiling = round(PCIE_LANE_GBPS[int(gen)] * int(width), 1)
    return OfferField(
        "pcie_bw", None, "GB/s", Label.NOT_MEASURED,
        f"not measured: Vast times pinned host-to-GPU copies (CUDA bandwidthTest), which needs CUDA; the link's "
        f"ceiling is {ceiling} GB/s (PCIe gen {int(gen)} x{int(width)}: the maximum generation, as the link "
        "drops to a lower one at idle; the current width); measured copies reach roughly 80-90 % of it (inference)",
        definition, _source(SELF_TEST),
    )


def _cpu_arch(value: Any) -> Any:
    if isinstance(value, str):
        return {"x86_64": "amd64", "aarch64": "arm64"}.get(value, value)
    return value


def _system_fields(facts: dict[str, Any]) -> list[OfferField]:
    ram = _get(facts, "system", "ram_total_mib")
    os_id, version = _get(facts, "system", "os_id"), _get(facts, "system", "os_version_id")
    ubuntu: Any = version if os_id == "ubuntu" else (
        os_id if isinstance(os_id, Unknown) else Unknown(f"not Ubuntu ({str(os_id)[:40]}): Vast's field names Ubuntu's version")
    )
    return [
        _system_field("cpu_name", _get(facts, "system", "cpu_model"), "", "/proc/cpuinfo model name",
                      "CPU model (in the offer's cpu_name)", API_DOC),
        _system_field("cpu_arch", _cpu_arch(_get(facts, "system", "cpu_arch")), "", "kernel machine type",
                      "host machine cpu architecture (e.g. amd64, arm64)", CLI_DOC),
        _system_field("cpu_cores", _get(facts, "system", "cpu_logical_cores"), "", "logical CPUs the kernel reports",
                      "number of virtual cpus", CLI_DOC),
        _system_field("cpu_ram", ram, "MiB", "MemTotal from /proc/meminfo (the API's 'MB' values are MiB: 65536 for 64 GiB)",
                      "system RAM (CLI: in gigabytes; API: in MB)", API_DOC),
        _system_field("has_avx", _get(facts, "system", "cpu_avx"), "", "CPU flags in /proc/cpuinfo",
                      "CPU supports AVX instruction set", CLI_DOC),
        _system_field("ubuntu_version", ubuntu, "", "os-release VERSION_ID", "host machine ubuntu OS version", CLI_DOC),
    ]


def _disk_fields(facts: dict[str, Any], disk: DiskBandwidth | None, measure_hint: str) -> list[OfferField]:
    free = _get(facts, "storage", "docker_root", "free_gib")
    space = _system_field("disk_space", free, "GiB",
                          "free space on the filesystem of Docker's data root (Vast runs df -BG on /var/lib/docker)",
                          "disk storage space, in GB", CLI_DOC)
    definition = "disk read bandwidth, in MB/s (Vast's host script reports fio's MiB/s)"
    if disk is None:
        bw = OfferField("disk_bw", None, "MiB/s", Label.NOT_MEASURED, f"not measured: {measure_hint}",
                        definition, _source(CLI_DOC) + "; job: " + _source(HOST_SCRIPT))
    elif isinstance(disk.mib_s, Unknown):
        bw = OfferField("disk_bw", None, "MiB/s", Label.UNKNOWN, f"unknown: {disk.mib_s.reason}",
                        definition, _source(CLI_DOC) + "; job: " + _source(HOST_SCRIPT))
    else:
        written = f"{disk.bytes_written // (1 << 20)} MiB test file written and {'removed' if disk.file_removed else 'NOT removed'}"
        bw = OfferField(
            "disk_bw", disk.mib_s, "MiB/s", Label.MEASURED,
            f"Vast's fio job (random reads, 32 KiB, 16 jobs x iodepth 64, O_DIRECT, 1 s); {disk.note}; {written}; "
            f"{disk.fio_version or 'fio'}",
            definition, _source(CLI_DOC) + "; job: " + _source(HOST_SCRIPT),
        )
    return [space, bw]


def _vast_mbps(decimal_mbps: float) -> float:
    """Vast's host script turns the speed test's bytes/s into 8*bytes/2**20 ('Mb/s')."""
    return round(decimal_mbps * 1e6 / (1 << 20), 1)


def _network_fields(facts: dict[str, Any]) -> list[OfferField]:
    out = []
    bw = _get(facts, "network", "bandwidth")
    for name, key in (("inet_down", "download_mbps"), ("inet_up", "upload_mbps")):
        definition = f"internet {'download' if name == 'inet_down' else 'upload'} speed in Mb/s (API: MB/s)"
        source = _source(CLI_DOC) + "; units: " + _source(HOST_SCRIPT)
        value: Any = bw.get(key) if isinstance(bw, dict) else None
        if isinstance(bw, dict) and _number(value) and value > 0:
            how = (f"hostcheck's speed test against {str(bw.get('server', 'the probe server'))[:80]}: "
                   f"{value:g} Mbit/s, shown as Vast computes it (8 x bytes/s / 2^20)")
            out.append(OfferField(name, _vast_mbps(float(value)), "Mb/s", Label.MEASURED, how, definition, source))
        elif isinstance(bw, dict):
            why = str(bw.get("reason") or "the speed test did not measure this direction")[:200]
            out.append(OfferField(name, None, "Mb/s", Label.UNKNOWN, f"unknown: {why}", definition, source))
        else:
            out.append(OfferField(name, None, "Mb/s", Label.NOT_MEASURED, SPEEDTEST_HINT, definition, source))
    out.append(_direct_ports(facts))
    return out


def _direct_ports(facts: dict[str, Any]) -> OfferField:
    definition = "open ports on host's router"
    inbound = _get(facts, "network", "inbound")
    ports = inbound.get("ports") if isinstance(inbound, dict) else None
    if isinstance(inbound, dict) and inbound.get("seen_from") == "inside":
        return OfferField("direct_port_count", None, "", Label.NOT_MEASURED,
                          "not measured: the probe server reached this host from inside the LAN (hairpin NAT or "
                          "the same network); run it outside", definition, _source(CLI_DOC))
    if isinstance(inbound, dict) and inbound.get("probed") is True and isinstance(ports, list):
        reachable = sum(1 for p in ports if isinstance(p, dict) and p.get("result") == InboundResult.REACHABLE)
        how = (f"{reachable} of the {len(ports)} ports probed from outside answered; Vast counts the range the "
               "host opens for it (ports not probed are not counted)")
        return OfferField("direct_port_count", reachable, "", Label.MEASURED, how, definition, _source(CLI_DOC))
    return OfferField("direct_port_count", None, "", Label.NOT_MEASURED,
                      "not measured: needs an outside probe (--probe URL --probe-port PORT ...)", definition, _source(CLI_DOC))


NOT_BEFORE_LISTING = (
    ("reliability", "machine reliability score (see FAQ for explanation)", CLI_DOC,
     "computed by Vast from the machine's history once listed (it starts below 1); the reliability rehearsal predicts it"),
    ("dlperf", "DL-perf score (see FAQ for explanation)", CLI_DOC, "Vast's own scoring function, computed by Vast"),
    ("verified", "is the machine verified", CLI_DOC, "Vast verifies a listed machine (its self-test rents it briefly)"),
    ("dph_total", "Total $/hour rental cost", API_DOC, "the host's prices combined by the platform"),
    ("geolocation", "two letter country code", CLI_DOC, "set by Vast for the listed machine"),
    ("static_ip", "is the IP addr static/stable", CLI_DOC, "observed by Vast over time; the rehearsal can log it"),
)


def build_offer(
    facts: dict[str, Any],
    *,
    disk: DiskBandwidth | None = None,
    power: PowerEstimate | None = None,
    disk_hint: str = "run `hostcheck offer` on the machine itself (without --no-disk-bw)",
) -> Offer:
    fields = [*_gpu_fields(facts), *_system_fields(facts), *_disk_fields(facts, disk, disk_hint),
              *_network_fields(facts)]
    for name, definition, doc, why in NOT_BEFORE_LISTING:
        fields.append(OfferField(name, None, "", Label.NOT_BEFORE_LISTING, why, definition, _source(doc)))
    notes = [
        "Field names and definitions are Vast's; values are what hostcheck reads or measures here, "
        "before listing: Vast measures again once the machine is listed.",
    ]
    return Offer(fields, power, disk, notes, self_test_checks(facts, fields))


# Vast's self-test preflight (vast-cli machine_diagnostics.py preflight_requirement_checks and
# util.required_inet_mbps): the thresholds an offer must meet before the self-test rents it.
SYSTEM_RAM_CAP_MIB = 2_000_000


def required_inet_mbps(gpu_total_ram_mib: float) -> float:
    """100 Mb/s floor, 500 cap, linear in total VRAM against 192 GiB (Vast's rule)."""
    return min(500.0, max(100.0, 500.0 * (gpu_total_ram_mib / 1024.0) / 192.0))


def _compare(actual: float, operator: str, required: float) -> bool:
    return actual > required if operator == ">" else actual >= required


def self_test_checks(facts: dict[str, Any], fields: list[OfferField]) -> list[SelfTestCheck]:
    values = {f.name: f.value for f in fields}
    devices = _devices(facts)
    total_vram: float | None = None
    if not isinstance(devices, Unknown) and devices and all(_number(d.get("vram_total_mib")) for d in devices):
        total_vram = float(sum(d["vram_total_mib"] for d in devices))
    num: Any = values.get("num_gpus")
    per_gpu_gib = total_vram / num / 1024 if total_vram is not None and _number(num) and num else None
    rules: list[tuple[str, Any, str, float | None, str]] = [
        ("cuda_max_good", values.get("cuda_max_good"), ">=", 11.8, "CUDA"),
        ("reliability", None, ">", 0.90, "ratio"),
        ("direct_port_count", values.get("direct_port_count"), ">=", 4, "ports"),
        ("pcie_bw", values.get("pcie_bw"), ">", 2.85, "GB/s"),
        ("inet_down", values.get("inet_down"), ">=",
         None if total_vram is None else round(required_inet_mbps(total_vram), 2), "Mb/s"),
        ("inet_up", values.get("inet_up"), ">=",
         None if total_vram is None else round(required_inet_mbps(total_vram), 2), "Mb/s"),
        ("gpu_ram", None if per_gpu_gib is None else round(per_gpu_gib, 2), ">", 7, "GiB"),
        ("cpu_ram", values.get("cpu_ram"), ">=",
         None if total_vram is None else round(min(0.95 * total_vram, SYSTEM_RAM_CAP_MIB), 2), "MiB"),
        ("cpu_cores", values.get("cpu_cores"), ">=", 2.0 * num if _number(num) else None, "cores"),
    ]
    checks = []
    for name, actual, operator, required, unit in rules:
        if required is None:
            continue  # the threshold depends on a figure that is unknown here
        number = None
        if isinstance(actual, str):
            try:
                number = float(actual)
            except ValueError:
                number = None
        elif _number(actual):
            number = float(actual)
        status = "unknown" if number is None else ("pass" if _compare(number, operator, required) else "fail")
        checks.append(SelfTestCheck(name, number, operator, float(required), unit, status))
    return checks
