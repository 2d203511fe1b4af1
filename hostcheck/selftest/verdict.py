"""The self-test's judgement: the measurements of a :class:`~hostcheck.selftest.results.Run`
turned into findings in the audit's format (measured, threshold with operator and unit, source,
why, fix), the first stage that failed, and the answer. Pure: no NVML, no driver, no clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hostcheck.models import Finding, Operator, Severity, SourceRef, Status
from hostcheck.selftest.results import STAGE_TITLES, STAGES, GpuResult, Run, summary
from hostcheck.selftest.rules import Rule, rules

FAMILY = "Self-test"
MIB = 1 << 20
# NVML's clocks event reasons that slow a loaded card down, and what each means to an owner.
HELD_BACK_BY = {
    0x4: "the power limit (software power cap)",
    0x8: "a hardware slowdown (power brake or overheating signalled by the board)",
    0x20: "heat (software thermal slowdown)",
    0x40: "heat (hardware thermal slowdown)",
    0x80: "the power supply (hardware power brake)",
}
FAILED = (Status.FAIL, Status.WARN)
UNJUDGED = (Status.ERROR, Status.UNKNOWN)

WHY = {
    "SELF-1010": "Vast runs these gates before its test starts; a failed gate stops the test before the GPU is touched.",
    "SELF-1020": "Vast's test allocates this share of every GPU's memory; a card that cannot give it fails the "
                 "test, and a renter's job that sizes itself to the card crashes the same way.",
    "SELF-1030": "Words that do not read back as written are memory that corrupts a renter's data; Vast's ECC "
                 "stage fails on them.",
    "SELF-1040": "Every renter's job starts by loading data over this link; under Vast's gate the self-test's "
                 "transfers fail or time out.",
    "SELF-1050": "A card that cannot hold its clocks under load delivers a fraction of what it is listed as; "
                 "renters' benchmarks and Vast's DLPerf see it.",
    "SELF-1060": "A card at its slowdown temperature slows itself down under a renter's job, and heat is the "
                 "first thing Vast's stress stage failures point at.",
    "SELF-1070": "An uncorrectable ECC error during load fails Vast's ECC stage and ends a renter's job.",
    "SELF-1080": "An Xid logged under load is the driver reporting a GPU fault; Vast's stress stage fails on it.",
    "SELF-1090": "Vast's stress stage runs the GPU at full load for its whole length; a card that stops, "
                 "disappears or overheats before the end fails it.",
    "SELF-1100": "Multi-GPU renters' jobs (NCCL) move data between the GPUs; a copy that fails here fails "
                 "Vast's NCCL stage.",
    "SELF-1110": "Vast's NCCL stage runs this collective across the GPUs; multi-GPU training runs it all the time.",
}
FIX = {
    "SELF-1010": "Run `hostcheck audit --policy vast` and fix its blockers first.",
    "SELF-1020": "Close what holds GPU memory (a desktop session, a miner, another container) and rerun; on a "
                 "display GPU, run without a desktop on it.",
    "SELF-1030": "Rerun once; if words still differ, the card's memory is failing: have it repaired or replaced.",
    "SELF-1040": "Seat the card in a full-width slot (x8 or x16) directly, without an x1 riser, and set the "
                 "slot's PCIe generation to Auto or the highest in the BIOS.",
    "SELF-1050": "See what held it back: raise a lowered power limit (nvidia-smi -pl, within the card's "
                 "range), improve cooling, or on a laptop use the maximum-performance mode on mains power.",
    "SELF-1060": "Improve cooling: clean the fans and heatsink, add case airflow, replace a failing fan or "
                 "dried thermal paste.",
    "SELF-1070": "Rerun; if uncorrectable errors recur, the card's memory is failing: have it replaced.",
    "SELF-1080": "Look the Xid up in NVIDIA's Xid catalogue (`hostcheck watch report` explains recorded "
                 "ones); check power cabling, the riser and the slot for a bus fault (Xid 79).",
    "SELF-1090": "Check power cabling and the power supply's capacity, reseat the card, and look at the Xid "
                 "lines the run logged.",
    "SELF-1100": "Check the GPUs' slots and bridges; without peer-to-peer, NCCL goes through host memory, "
                 "which works but is slower.",
    "SELF-1110": "Rerun with NCCL_DEBUG=INFO set to see NCCL's own reason; check the GPUs' slots, bridges and "
                 "the IOMMU (peer-to-peer through an IOMMU often fails).",
}
TITLES = {
    "SELF-1010": "Vast's static gates (the audit, collected now)",
    "SELF-1020": "VRAM allocated, share of the total",
    "SELF-1030": "VRAM words that read back wrong",
    "SELF-1040": "Host-to-device bandwidth (pinned)",
    "SELF-1050": "SM clock held under load, share of its maximum",
    "SELF-1060": "Hottest reading under load",
    "SELF-1070": "Uncorrectable ECC errors during the run",
    "SELF-1080": "Xid lines the kernel logged during the run",
    "SELF-1090": "Load run to the end",
    "SELF-1100": "GPU to GPU copies that failed",
    "SELF-1110": "NCCL all-reduce across the GPUs",
}
STAGE_OF = {"SELF-1010": "preflight", "SELF-1020": "vram", "SELF-1030": "vram", "SELF-1040": "link",
            "SELF-1050": "load", "SELF-1060": "load", "SELF-1070": "load", "SELF-1080": "load",
            "SELF-1090": "load", "SELF-1100": "peers", "SELF-1110": "peers"}
RULE_OF = {"SELF-1010": "pcie_bw_gbps", "SELF-1020": "vram_share", "SELF-1030": "pattern_errors",
           "SELF-1040": "pcie_bw_gbps", "SELF-1050": "clock_share", "SELF-1060": "temperature_margin_c",
           "SELF-1070": "ecc_uncorrected", "SELF-1080": "xid_lines", "SELF-1090": "stress_seconds",
           "SELF-1100": "peer_copy", "SELF-1110": "peer_copy"}
PREFLIGHT_SOURCE = SourceRef(
    title="hostcheck audit --policy vast: each gate cites its own page (hostcheck explain ID)",
    url="https://github.com/vast-ai/vast-cli/blob/55679830a2c2adcf5c7fad08bf08717a9591062a/vastai/cli/self_test/machine_diagnostics.py",
    checked="2026-12-07",
)


def _finding(check: str, gpu: int | None, status: Status, measured: Any, threshold: Any, op: Operator, unit: str,
             detail: str, *, severity: Severity | None = None, rule: Rule | None = None) -> Finding:
    rule = rule or rules()[RULE_OF[check]]
    if severity is None:
        severity = Severity.RISK if rule.draft or rule.own_choice else Severity.BLOCKER
    if status == Status.FAIL and severity != Severity.BLOCKER:
        status = Status.WARN
    title = TITLES[check] if gpu is None else f"GPU {gpu}: {_lower(TITLES[check])}"
    return Finding(
        id=check, title=title, family=FAMILY, severity=severity, status=status, measured=measured,
        threshold=threshold, op=op, unit=unit, detail=detail, why=WHY[check], fix=FIX[check], fix_role="",
        source=PREFLIGHT_SOURCE if check == "SELF-1010" else rule.ref, note=rule.own_choice,
    )


def _lower(text: str) -> str:
    """A title inside a sentence: its first word lowercased, unless an acronym (SM, VRAM)."""
    return text[0].lower() + text[1:] if len(text) > 1 and text[1].islower() else text


def _passes(ok: bool) -> Status:
    return Status.PASS if ok else Status.FAIL


def preflight_findings(run: Run) -> list[Finding]:
    pre = run.preflight
    if not pre:
        return []
    if pre.get("error"):
        return [_finding("SELF-1010", None, Status.UNKNOWN, None, 0, Operator.EQ, "failed gates",
                         f"could not collect: {pre['error']}")]
    blockers, unknowns = list(pre.get("blockers", [])), list(pre.get("unknowns", []))
    detail = (f"failed: {', '.join(blockers)}" if blockers else "none failed") + (
        f"; not determined: {', '.join(unknowns)}" if unknowns else "")
    return [_finding("SELF-1010", None, _passes(not blockers), len(blockers), 0, Operator.EQ, "failed gates", detail,
                     severity=Severity.BLOCKER)]


def _vram(gpu: GpuResult) -> list[Finding]:
    share = rules()["vram_share"]
    error = gpu.errors.get("vram", "")
    total_mib = gpu.total_bytes // MIB
    if gpu.wanted_bytes is None:
        return [_finding("SELF-1020", gpu.index, Status.ERROR, None, share.value, Operator.GE, "of total", error or "not run")]
    if gpu.allocated_bytes is None:
        free = f"{(gpu.free_bytes or 0) // MIB:,} MiB" if gpu.free_bytes is not None else "an unknown amount"
        measured = round((gpu.free_bytes or 0) / gpu.total_bytes, 3) if gpu.total_bytes else None
        status = Status.FAIL if "OUT_OF_MEMORY" in error else Status.ERROR
        return [_finding("SELF-1020", gpu.index, status, measured, share.value, Operator.GE, "of total",
                         f"asked for {gpu.wanted_bytes // MIB:,} of {total_mib:,} MiB: {error}; {free} was free, "
                         "so the most it could give is the share shown")]
    if gpu.total_bytes <= 0:  # no total to take the share of: unknown, never a pass
        return [_finding("SELF-1020", gpu.index, Status.ERROR, None, share.value, Operator.GE, "of total",
                         f"the driver reported {gpu.total_bytes} bytes of memory in all")]
    found = [_finding("SELF-1020", gpu.index, Status.PASS, round(gpu.allocated_bytes / gpu.total_bytes, 3), share.value,
                      Operator.GE, "of total", f"{gpu.allocated_bytes // MIB:,} of {total_mib:,} MiB")]
    if gpu.pattern_errors is not None:
        found.append(_finding("SELF-1030", gpu.index, _passes(gpu.pattern_errors == 0), gpu.pattern_errors, 0,
                              Operator.EQ, "words", f"{gpu.allocated_bytes // 4:,} words written and read back"))
    else:
        status = Status.FAIL if "ECC_UNCORRECTABLE" in error else Status.ERROR
        found.append(_finding("SELF-1030", gpu.index, status, None, 0, Operator.EQ, "words", error or "not read back"))
    return found


def _link_detail(gpu: GpuResult) -> str:
    parts = [f"device to host {gpu.d2h_gbps:g} GB/s" if gpu.d2h_gbps is not None else "device to host not measured"]
    (gen, max_gen), (width, max_width) = gpu.pcie_gen, gpu.pcie_width
    if gen is not None or width is not None:
        parts.append(f"PCIe gen {gen if gen is not None else '?'} of {max_gen if max_gen is not None else '?'}, "
                     f"x{width if width is not None else '?'} of x{max_width if max_width is not None else '?'} (NVML)")
    return "; ".join(parts)


def _link(gpu: GpuResult) -> list[Finding]:
    gate = rules()["pcie_bw_gbps"]
    if gpu.h2d_gbps is None:
        return [_finding("SELF-1040", gpu.index, Status.ERROR, None, gate.value, Operator.GT, "GB/s",
                         gpu.errors.get("link", "not run"))]
    return [_finding("SELF-1040", gpu.index, _passes(gpu.h2d_gbps > gate.value), gpu.h2d_gbps, gate.value, Operator.GT,
                     "GB/s", _link_detail(gpu))]


def held_back(gpu: GpuResult) -> list[str]:
    """What NVML said slowed the card, each with the share of readings it was active in."""
    if gpu.load is None:
        return []
    reasons = [s.reasons for s in gpu.load.samples if s.reasons is not None]
    found = []
    for bit, what in HELD_BACK_BY.items():
        active = sum(1 for r in reasons if r & bit)
        if active:
            found.append(f"{what} in {active} of {len(reasons)} readings")
    return found


def _load(run: Run, gpu: GpuResult, requested_s: float) -> list[Finding]:
    load = gpu.load
    if load is None:
        return []
    found: list[Finding] = []
    samples = load.samples
    ran_s = load.ran_s
    error = gpu.errors.get("load", "")
    lost = any(s.lost for s in samples) or "UNKNOWN" in error or "lost" in error
    if error:
        detail = f"stopped after {ran_s:g} s: {error}"
    elif run.stopped:
        detail = f"stopped after {ran_s:g} s: {run.stopped}"
    else:
        detail = f"{ran_s:g} s of full load"
    ok = not error and not run.stopped and ran_s >= requested_s - 1.5
    found.append(_finding("SELF-1090", gpu.index, _passes(ok), round(ran_s), round(requested_s), Operator.GE, "s",
                          detail + (" (the GPU was lost: see the Xid lines)" if lost else ""),
                          rule=rules()["xid_lines"]))
    clock_rule = rules()["clock_share"]
    clocks = load.values("sm_clock_mhz", last_s=60)
    if clocks and load.max_sm_clock_mhz:
        median = sorted(clocks)[len(clocks) // 2]
        share = round(median / load.max_sm_clock_mhz, 2)
        why_slow = held_back(gpu)
        power = load.values("power_w", last_s=60)
        parts = [f"median {median:g} MHz of {load.max_sm_clock_mhz} MHz over the last minute"]
        if power and load.power_limit_w:
            limit = f"power {sorted(power)[len(power) // 2]:g} W of its {load.power_limit_w:g} W limit"
            if load.default_power_limit_w and load.default_power_limit_w > load.power_limit_w * 1.05:
                limit += f" (the card's default is {load.default_power_limit_w:g} W)"
            parts.append(limit)
        parts.append("held back by " + "; ".join(why_slow) if why_slow else "no slowdown reason reported")
        found.append(_finding("SELF-1050", gpu.index, _passes(share >= clock_rule.value), share, clock_rule.value,
                              Operator.GE, "of max", "; ".join(parts)))
    else:
        found.append(_finding("SELF-1050", gpu.index, Status.UNKNOWN, None, clock_rule.value, Operator.GE, "of max",
                              "NVML gave no SM clock readings" if load.max_sm_clock_mhz else "NVML gave no maximum SM clock"))
    temps = load.values("temperature_c")
    if temps and load.slowdown_c:
        hottest = int(max(temps))
        found.append(_finding("SELF-1060", gpu.index, _passes(hottest < load.slowdown_c), hottest, load.slowdown_c,
                              Operator.LT, "°C", f"the card's slowdown temperature is {load.slowdown_c} °C; the run "
                              f"stops at {load.stop_at_c} °C", rule=rules()["temperature_margin_c"]))
    else:
        found.append(_finding("SELF-1060", gpu.index, Status.UNKNOWN, None, load.slowdown_c, Operator.LT, "°C",
                              "NVML gave no temperature or no slowdown threshold"))
    if load.ecc_before is None or load.ecc_after is None:
        found.append(_finding("SELF-1070", gpu.index, Status.SKIPPED, None, 0, Operator.EQ, "errors",
                              "this card reports no ECC counters (ECC off or not supported, as on GeForce cards)"
                              if not lost else "not read: the GPU was lost"))
    else:
        delta = load.ecc_after - load.ecc_before
        found.append(_finding("SELF-1070", gpu.index, _passes(delta == 0), delta, 0, Operator.EQ, "errors",
                              f"volatile uncorrected count {load.ecc_before} before, {load.ecc_after} after"))
    return found


def _xid(run: Run) -> list[Finding]:
    if not any(g.load is not None for g in run.gpus):
        return []
    if run.kernel_log:
        return [_finding("SELF-1080", None, Status.UNKNOWN, None, 0, Operator.EQ, "lines", run.kernel_log)]
    xids = [x for x in run.xid_lines if x.get("kind") == "xid"]
    shown = ", ".join(f"Xid {x.get('code')} ({x.get('mnemonic') or 'not in the catalogue'})" for x in xids[:5])
    return [_finding("SELF-1080", None, _passes(not xids), len(xids), 0, Operator.EQ, "lines",
                     shown or "none logged")]


def _peers(run: Run) -> list[Finding]:
    found = []
    for copy in run.peers:
        how = "peer-to-peer" if copy.peer_to_peer else "through host memory (no peer-to-peer access)"
        detail = f"GPU {copy.source} to GPU {copy.destination}: {how}" + (
            f", {copy.gbps:g} GB/s" if copy.gbps is not None else "") + (f"; {copy.error}" if copy.error else "")
        found.append(_finding("SELF-1100", None, _passes(not copy.error), int(bool(copy.error)), 0, Operator.EQ,
                              "failed copies", detail))
    if run.nccl == "absent":
        found.append(_finding("SELF-1110", None, Status.SKIPPED, None, 0, Operator.EQ, "failures",
                              "NCCL's library (libnccl.so.2) is not installed on the host; renters' images bring "
                              "their own"))
    elif run.nccl:
        detail = run.nccl_error or f"{run.nccl}: {run.nccl_gbps:g} GB/s bus bandwidth"
        found.append(_finding("SELF-1110", None, _passes(not run.nccl_error), int(bool(run.nccl_error)), 0,
                              Operator.EQ, "failures", f"{run.nccl}: {detail}" if run.nccl_error else detail))
    return found


@dataclass(frozen=True)
class Verdict:
    stages: dict[str, list[Finding]]
    first_failed: str | None  # the stage whose finding failed first, in the order Vast runs them
    unjudged: list[str]  # stages with a finding that could not be judged
    headline: list[str]
    ran: bool  # the GPU stages ran (False: no driver, no device)

    @property
    def findings(self) -> list[Finding]:
        return [f for stage in STAGES for f in self.stages.get(stage, [])]


def judge(run: Run) -> Verdict:
    requested_s = run.minutes * 60
    stages: dict[str, list[Finding]] = {stage: [] for stage in STAGES}
    stages["preflight"] = preflight_findings(run)
    for gpu in run.gpus:
        stages["vram"] += _vram(gpu)
        stages["link"] += _link(gpu)
        stages["load"] += _load(run, gpu, requested_s)
    stages["load"] += _xid(run)
    stages["peers"] = _peers(run)
    first = next((stage for stage in STAGES if any(f.status in FAILED for f in stages[stage])), None)
    unjudged = [stage for stage in STAGES if any(f.status in UNJUDGED for f in stages[stage])]
    return Verdict(stages, first, unjudged, _headline(run, stages, first, unjudged), ran=not run.error and bool(run.gpus))


SINGULAR = {"lines": "line", "words": "word", "errors": "error", "failures": "failure",
            "failed gates": "failed gate", "failed copies": "failed copy"}


def shown(value: Any, unit: str) -> str:
    """A measured value or threshold with its unit, for a reader ("95%", "1 line", "2.85 GB/s")."""
    if value is None:
        return "unknown"
    if unit in ("of total", "of max"):
        return f"{value:.0%}"
    if not isinstance(value, (int, float)):
        return f"{value} {unit}"
    return f"{value:g} {SINGULAR.get(unit, unit) if value == 1 else unit}"


def _measured(f: Finding) -> str:
    return f"{shown(f.measured, f.unit)}, needs {f.op.value} {shown(f.threshold, f.unit)}"


def _headline(run: Run, stages: dict[str, list[Finding]], first: str | None, unjudged: list[str]) -> list[str]:
    if run.error:
        return [f"The self-test could not start on the GPU: {run.error}.",
                "What to do: check that the NVIDIA driver is loaded (nvidia-smi lists the GPU) and rerun."]
    if not run.gpus and not stages["preflight"]:
        return ["The self-test ran no stage."]
    if first is not None:
        finding = next(f for f in stages[first] if f.status in FAILED)
        xid = next((f for f in stages["load"] if f.id == "SELF-1080" and f.status in FAILED), None)
        logged = f"; the kernel logged {xid.detail}" if xid is not None and finding.id == "SELF-1090" else ""
        lines = [f"Vast's self-test would likely fail at the {STAGE_TITLES[first].lower()} stage: "
                 f"{_lower(finding.title)} {_measured(finding)}{logged}.",
                 f"What it means: {finding.why}", f"What to do: {finding.fix}"]
        others = sorted({STAGE_TITLES[s].lower() for s in STAGES if s != first and any(f.status in FAILED for f in stages[s])})
        if others:
            lines.append(f"Also failed: {', '.join(others)} (details below).")
        return lines
    gpus = f"{len(run.gpus)} GPU" + ("s" if len(run.gpus) != 1 else "")
    if unjudged:
        return [f"Nothing failed on {gpus}, but {', '.join(STAGE_TITLES[s].lower() for s in unjudged)} could not be "
                "judged (details below): not a pass."]
    if run.stopped:
        return [f"Stopped early: {run.stopped}; nothing failed before that."]
    return [f"Every GPU stage of Vast's self-test that hostcheck reproduces passed on {gpus} "
            f"({run.minutes:g} min of load)."]


def exit_status(verdict: Verdict) -> bool:
    """True when the run passed: nothing failed and everything was judged."""
    return verdict.first_failed is None and not verdict.unjudged and verdict.ran


def per_minute(gpu: GpuResult) -> list[dict[str, Any]]:
    """Every sample of a GPU summarised per minute: min, median and max of each reading."""
    if gpu.load is None:
        return []
    minutes: dict[int, list[Any]] = {}
    for sample in gpu.load.samples:
        minutes.setdefault(int(sample.t // 60), []).append(sample)
    rows = []
    for minute, samples in sorted(minutes.items()):
        row: dict[str, Any] = {"minute": minute + 1, "samples": len(samples)}
        for name in ("sm_clock_mhz", "power_w", "temperature_c"):
            row[name] = summary([float(v) for s in samples if (v := getattr(s, name)) is not None])
        rows.append(row)
    return rows
