"""What the self-test's stages measured, as plain data: the stages (system) write it, the
verdict (judgement) reads it, the JSON output prints it. Nothing here judges."""

from __future__ import annotations

import dataclasses
import statistics
import types
import typing
from dataclasses import dataclass, field
from typing import Any

STAGES = ("preflight", "vram", "link", "load", "peers")
STAGE_TITLES = {
    "preflight": "Preflight (the audit's static gates)",
    "vram": "VRAM allocation and pattern",
    "link": "Host-device link",
    "load": "Sustained load",
    "peers": "GPU to GPU copies",
}


@dataclass
class Sample:
    """One NVML reading of one GPU (None: the query failed or is not supported)."""

    t: float  # seconds since the load started
    sm_clock_mhz: int | None = None
    power_w: float | None = None
    temperature_c: int | None = None
    reasons: int | None = None  # NVML's clocks event reasons bitmask
    lost: bool = False  # NVML said the GPU is lost (fallen off the bus)


@dataclass
class GpuLoad:
    """The sustained-load stage of one GPU."""

    index: int
    max_sm_clock_mhz: int | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    slowdown_c: int | None = None
    stop_at_c: int | None = None
    ecc_before: int | None = None
    ecc_after: int | None = None
    ran_s: float = 0.0  # how long the load ran on this GPU before it ended or the GPU failed
    samples: list[Sample] = field(default_factory=list)

    def values(self, name: str, last_s: float | None = None) -> list[float]:
        end = self.samples[-1].t if self.samples else 0.0
        return [float(v) for s in self.samples
                if (v := getattr(s, name)) is not None and (last_s is None or s.t >= end - last_s)]


@dataclass
class GpuResult:
    """Everything measured on one GPU; a stage that did not run leaves its fields None."""

    index: int
    name: str = ""
    pci_bus_id: str = ""
    compute_capability: str = ""
    total_bytes: int = 0
    multiprocessors: int = 0
    # vram
    free_bytes: int | None = None
    wanted_bytes: int | None = None
    allocated_bytes: int | None = None
    pattern_errors: int | None = None
    # link
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    pcie_gen: tuple[int | None, int | None] = (None, None)  # negotiated, maximum
    pcie_width: tuple[int | None, int | None] = (None, None)
    # load
    load: GpuLoad | None = None
    # what a stage could not do: stage -> the driver's error or the reason
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class PeerCopy:
    source: int
    destination: int
    peer_to_peer: bool  # the driver reports direct access; else NCCL would go through host memory
    gbps: float | None = None
    error: str = ""


@dataclass
class Run:
    """A whole self-test run."""

    started_at: str
    driver_version: str = ""
    cuda_version: str = ""
    minutes: float = 1.0
    preflight: dict[str, Any] = field(default_factory=dict)  # blockers, unknowns, owner risk: from the audit
    gpus: list[GpuResult] = field(default_factory=list)
    peers: list[PeerCopy] = field(default_factory=list)
    nccl: str = ""  # "absent", or the library run ("NCCL 2.21.5"): NCCL runs only where it is installed
    nccl_gbps: float | None = None  # its all-reduce's bus bandwidth
    nccl_error: str = ""
    xid_lines: list[dict[str, Any]] = field(default_factory=list)  # classified kernel lines during the run
    kernel_log: str = ""  # "" read; otherwise why the kernel log could not be read
    stopped: str = ""  # why the run stopped early ("" it ran to the end)
    error: str = ""  # a failure before any GPU stage ran (no driver, no device)
    skipped: dict[str, str] = field(default_factory=dict)  # stage -> why it did not run
    released: bool = True  # everything allocated was released at the end
    seconds: float = 0.0


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2), "max": round(max(values), 2)}


MAX_ITEMS = 100_000  # samples of 8 GPUs over the longest run, at one a second, with room
MAX_TEXT = 2000


class BadRun(ValueError):
    """A run read back from elsewhere (the container's worker) that is not one."""


def run_from_dict(data: Any) -> Run:
    """A :class:`Run` from its ``dataclasses.asdict`` form, checked field by field against the
    types declared here: what a container wrote is input, not trusted (sizes bounded, unknown
    keys refused, text cut)."""
    return _typed(Run, data, "run")


def _typed(kind: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return _plain(value, where, depth=0)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _typed(next(a for a in args if a is not type(None)), value, where)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise BadRun(f"{where}: not an object")
        hints = typing.get_type_hints(kind)
        unknown = set(value) - set(hints)
        if unknown:
            raise BadRun(f"{where}: unknown keys {sorted(unknown)[:3]}")
        missing = [f.name for f in dataclasses.fields(kind) if f.name not in value
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise BadRun(f"{where}: missing {', '.join(missing)}")
        build: Any = kind
        return build(**{name: _typed(hints[name], value[name], f"{where}.{name}") for name in value})
    if origin is list:
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise BadRun(f"{where}: not a list of at most {MAX_ITEMS} items")
        return [_typed(args[0], item, f"{where}[]") for item in value]
    if origin is tuple:
        if not isinstance(value, list) or len(value) != len(args):
            raise BadRun(f"{where}: not a list of {len(args)}")
        return tuple(_typed(a, item, f"{where}[]") for a, item in zip(args, value, strict=True))
    if origin is dict:
        if not isinstance(value, dict) or len(value) > 64:
            raise BadRun(f"{where}: not an object of at most 64 keys")
        return {str(k)[:80]: _typed(args[1], v, f"{where}.{k}"[:200]) for k, v in value.items()}
    if kind is bool:
        if not isinstance(value, bool):
            raise BadRun(f"{where}: not true or false")
        return value
    if kind is int:
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 1 << 64:
            raise BadRun(f"{where}: not an integer")
        return value
    if kind is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value or abs(value) > 1e15:
            raise BadRun(f"{where}: not a number")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise BadRun(f"{where}: not text")
        return value[:MAX_TEXT]
    raise BadRun(f"{where}: no reader for {kind}")


def _plain(value: Any, where: str, depth: int) -> Any:
    """JSON of a shape not declared here (the classified kernel lines): bounded in depth and size."""
    if depth > 4:
        raise BadRun(f"{where}: nested too deep")
    if isinstance(value, dict):
        return {str(k)[:80]: _plain(v, where, depth + 1) for k, v in list(value.items())[:64]}
    if isinstance(value, list):
        return [_plain(v, where, depth + 1) for v in value[:1000]]
    if isinstance(value, str):
        return value[:MAX_TEXT]
    return value
