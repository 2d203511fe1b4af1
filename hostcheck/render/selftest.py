"""The self-test's output: a short answer in the audit's voice (the stage that failed first,
what it means, what to do), then one line per finding, fitted to 80 columns; or the JSON
document with every sample summarised per minute."""

from __future__ import annotations

import textwrap
from dataclasses import asdict
from typing import Any

from hostcheck import __version__
from hostcheck.models import Status
from hostcheck.render.escape import escape_text
from hostcheck.selftest.results import STAGE_TITLES, STAGES, Run
from hostcheck.selftest.verdict import Verdict, exit_status, held_back, per_minute, shown

WIDTH = 80
MARK = {Status.PASS: "ok", Status.FAIL: "FAIL", Status.WARN: "WARN", Status.UNKNOWN: "??",
        Status.ERROR: "ERR", Status.SKIPPED: "--"}
FORMAT = 1


def _wrap(text: str, indent: str = "", first: str = "") -> list[str]:
    return textwrap.wrap(escape_text(text), WIDTH, initial_indent=first or indent, subsequent_indent=indent,
                         break_on_hyphens=False) or [first]


def _value(measured: Any, unit: str) -> str:
    text = shown(measured, unit)
    return f"{text} {unit}" if unit in ("of total", "of max") and measured is not None else text


def render_refusal(reasons: list[str]) -> str:
    """Why the self-test did not start, one reason a line."""
    return "hostcheck selftest did not start:\n" + "".join(f"- {escape_text(r)}\n" for r in reasons)


def render_text(run: Run, verdict: Verdict) -> str:
    lines: list[str] = []
    for sentence in verdict.headline:
        lines += _wrap(sentence)
    lines.append("")
    for gpu in run.gpus:
        lines += _wrap(f"GPU {gpu.index}: {gpu.name}, {gpu.total_bytes >> 20:,} MiB, compute {gpu.compute_capability}, "
                       f"PCI {gpu.pci_bus_id}")
    if run.gpus:
        inside = run.preflight.get("container", {}).get("image")
        lines += _wrap(f"Driver: CUDA {run.cuda_version}" + (f", NVIDIA {run.driver_version}" if run.driver_version else "")
                       + f"; {run.seconds:g} s in all" + (f", inside {inside} (docker run --gpus all)." if inside else "."))
        lines.append("")
    for stage in STAGES:
        findings = verdict.stages.get(stage, [])
        if not findings:
            if stage in run.skipped:
                lines += _wrap(f"{STAGE_TITLES[stage]}: not run: {run.skipped[stage]}")
            continue
        lines.append(STAGE_TITLES[stage])
        for f in findings:
            need = _value(f.threshold, f.unit) if f.threshold is not None else "?"
            lines += _wrap(f"{f.title}: {_value(f.measured, f.unit)} (needs {f.op.value} {need})",
                           indent="       ", first=f"  {MARK[f.status]:<4} ")
            if f.detail:
                lines += _wrap(f.detail, indent="       ")
    if "samples" in run.skipped:
        lines += _wrap(f"No NVML readings: {run.skipped['samples']}.")
    if not run.released:
        lines += _wrap("Not everything allocated could be released by hand; the driver frees it when this process "
                       "ends.")
    lines.append("")
    lines += _wrap("Details: --format json (every reading summarised per minute); the sources: hostcheck selftest "
                   "--help.")
    return "\n".join(lines) + "\n"


def render_json(run: Run, verdict: Verdict) -> dict[str, Any]:
    gpus = []
    for gpu in run.gpus:
        entry = asdict(gpu)
        load = entry.pop("load")
        if load is not None:
            load.pop("samples")
            load["samples"] = len(gpu.load.samples) if gpu.load else 0
            load["per_minute"] = per_minute(gpu)
            load["held_back_by"] = held_back(gpu)
        entry["load"] = load
        gpus.append(entry)
    document = {
        "format": FORMAT,
        "tool": {"name": "hostcheck", "version": __version__},
        "started_at": run.started_at,
        "answer": {"headline": " ".join(verdict.headline), "first_failed_stage": verdict.first_failed,
                   "not_judged": verdict.unjudged, "passed": exit_status(verdict)},
        "minutes": run.minutes,
        "seconds": run.seconds,
        "stopped": run.stopped,
        "error": run.error,
        "released": run.released,
        "driver": {"cuda": run.cuda_version, "nvidia": run.driver_version},
        "stages": [{"stage": stage, "title": STAGE_TITLES[stage], "skipped": run.skipped.get(stage, ""),
                    "findings": [f.model_dump(mode="json") for f in verdict.stages.get(stage, [])]} for stage in STAGES],
        "preflight": run.preflight,
        "gpus": gpus,
        "peers": [asdict(p) for p in run.peers],
        "nccl": run.nccl,
        "kernel_lines": run.xid_lines,
        "kernel_log": run.kernel_log,
    }
    return document
