"""The self-test's GPU stages: VRAM, the host-device link, sustained load, GPU-to-GPU copies.

Each stage measures and records into the :class:`~hostcheck.selftest.results.Run`; the
verdict (``hostcheck.selftest.verdict``) judges. One thread drives every GPU: kernels are
queued on all of them, then each is synchronised, and NVML is sampled between batches, so a
multi-GPU machine is loaded all at once, as a renter's job loads it.

Whatever happens (a driver error, a lost device, Ctrl-C), :func:`run_gpu_stages` frees what it
allocated and releases every context it retained before it returns or re-raises.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hostcheck.selftest import kernels
from hostcheck.selftest.cuda import CUDA_ERROR_OUT_OF_MEMORY, CudaError, Driver
from hostcheck.selftest.results import GpuLoad, GpuResult, PeerCopy, Run
from hostcheck.selftest.sampler import NvmlGpu, Ticker, open_gpus

MIB = 1 << 20
LINK_BYTES = 256 * MIB
LINK_REPEATS = 5
LINK_BUDGET_S = 8.0  # per direction per GPU: a x1 riser at 0.25 GB/s still ends in time
PEER_BYTES = 64 * MIB
BATCH_TARGET_S = 0.1  # one kernel batch: far under the display watchdog's few seconds
MAX_BURN_ITERATIONS = 1 << 22
VRAM_ESTIMATE_S = 10.0  # per GPU, shown before the start: filling and checking at VRAM speed
LINK_ESTIMATE_S = 2 * LINK_BUDGET_S
MAX_KERNEL_LINES = 200


@dataclass
class Options:
    minutes: float
    vram_share: float
    max_temp_c: int | None = None  # None: the card's slowdown temperature less the margin
    temperature_margin_c: int = 5
    link_bytes: int = LINK_BYTES
    link_repeats: int = LINK_REPEATS
    link_budget_s: float = LINK_BUDGET_S
    peer_bytes: int = PEER_BYTES
    batch_target_s: float = BATCH_TARGET_S


@dataclass
class Environment:
    """What the stages touch, all replaceable: the driver, NVML, the kernel log, the clock."""

    driver: Driver
    nvml: Any = None  # a pynvml-like module, or None: no NVML (no samples, no PCIe generation)
    kernel_lines: Callable[[float], list[str] | str] = lambda since: "the kernel log was not read"
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    progress: Callable[[str], None] = lambda line: None
    find_library: Callable[[str], str | None] = ctypes.util.find_library
    interrupted: Callable[[], bool] = lambda: False


def estimate_seconds(gpus: int, minutes: float) -> tuple[float, float]:
    """(about, at most) the GPU stages take on ``gpus`` GPUs: shown before the start."""
    pairs = gpus * (gpus - 1) // 2
    about = gpus * (VRAM_ESTIMATE_S / 2 + LINK_ESTIMATE_S / 4) + minutes * 60 + pairs * 1.0
    most = gpus * (VRAM_ESTIMATE_S + LINK_ESTIMATE_S) + minutes * 60 + pairs * LINK_BUDGET_S + 30
    return about, most


@dataclass
class _Held:
    """Everything allocated, so that it is freed whatever stops the run."""

    device: list[tuple[int, int]] = field(default_factory=list)  # (ordinal, pointer)
    host: list[int] = field(default_factory=list)
    modules: dict[int, int] = field(default_factory=dict)  # ordinal -> module


class _Gpus:
    def __init__(self, env: Environment, held: _Held) -> None:
        self.env = env
        self.driver = env.driver
        self.held = held
        self.broken: dict[int, str] = {}  # ordinal -> the error that left its context unusable

    def alloc(self, ordinal: int, size: int) -> int:
        self.driver.use(ordinal)
        pointer = self.driver.alloc(size)
        self.held.device.append((ordinal, pointer))
        return pointer

    def free(self, ordinal: int, pointer: int) -> None:
        self.held.device.remove((ordinal, pointer))
        self.driver.use(ordinal)
        self.driver.free(pointer)

    def alloc_host(self, size: int) -> int:
        pointer = self.driver.alloc_host(size)
        self.held.host.append(pointer)
        return pointer

    def free_host(self, pointer: int) -> None:
        self.held.host.remove(pointer)
        self.driver.free_host(pointer)

    def function(self, ordinal: int, name: str) -> int:
        self.driver.use(ordinal)
        if ordinal not in self.held.modules:
            self.held.modules[ordinal] = self.driver.load_module(kernels.PTX)
        return self.driver.function(self.held.modules[ordinal], name)

    @staticmethod
    def grid(gpu: GpuResult) -> int:
        """Blocks for a grid-stride kernel: eight per multiprocessor keeps every SM busy."""
        return max(1, min(gpu.multiprocessors, 1024)) * 8


def _failed(gpu: GpuResult, gpus: _Gpus, stage: str, exc: CudaError) -> None:
    gpu.errors[stage] = str(exc)
    if exc.code != CUDA_ERROR_OUT_OF_MEMORY:
        gpus.broken[gpu.index] = str(exc)


def _vram(gpu: GpuResult, gpus: _Gpus, options: Options) -> None:
    driver = gpus.driver
    driver.use(gpu.index)
    free, total = driver.mem_info()
    gpu.free_bytes = free
    wanted = int(total * options.vram_share) // 4 * 4
    gpu.wanted_bytes = wanted
    try:
        buffer = gpus.alloc(gpu.index, wanted)
    except CudaError as exc:
        _failed(gpu, gpus, "vram", exc)
        return
    gpu.allocated_bytes = wanted
    try:
        errors = gpus.alloc(gpu.index, 4)
        driver.zero_u32(errors)
        words, seed = wanted // 4, 0x5EED0000 + gpu.index
        blocks = gpus.grid(gpu)
        driver.launch(gpus.function(gpu.index, kernels.FILL), blocks, kernels.THREADS_PER_BLOCK,
                      [ctypes.c_uint64(buffer), ctypes.c_uint64(words), ctypes.c_uint32(seed)])
        driver.synchronize()
        driver.launch(gpus.function(gpu.index, kernels.CHECK), blocks, kernels.THREADS_PER_BLOCK,
                      [ctypes.c_uint64(buffer), ctypes.c_uint64(words), ctypes.c_uint32(seed), ctypes.c_uint64(errors)])
        driver.synchronize()
        gpu.pattern_errors = driver.read_u32(errors)
        gpus.free(gpu.index, errors)
        gpus.free(gpu.index, buffer)
    except CudaError as exc:
        _failed(gpu, gpus, "vram", exc)


def _rate(gpus: _Gpus, copy: Callable[[], None], size: int, options: Options) -> float:
    """The median GB/s of up to ``link_repeats`` copies, within the time budget (nvbandwidth's
    way: the median, so one slow copy does not decide)."""
    rates: list[float] = []
    start = gpus.env.clock()
    for _ in range(options.link_repeats):
        t0 = gpus.env.clock()
        copy()
        elapsed = max(gpus.env.clock() - t0, 1e-9)
        rates.append(size / elapsed / 1e9)
        if gpus.env.clock() - start > options.link_budget_s:
            break
    rates.sort()
    return round(rates[len(rates) // 2], 2)


def _link(gpu: GpuResult, gpus: _Gpus, options: Options, nvml_gpu: NvmlGpu | None) -> None:
    driver = gpus.driver
    if nvml_gpu is not None:
        gpu.pcie_gen, gpu.pcie_width = nvml_gpu.link()
    size = options.link_bytes
    try:
        driver.use(gpu.index)
        host = gpus.alloc_host(size)
        device = gpus.alloc(gpu.index, size)
        gpu.h2d_gbps = _rate(gpus, lambda: driver.copy_to_device(device, host, size), size, options)
        gpu.d2h_gbps = _rate(gpus, lambda: driver.copy_to_host(host, device, size), size, options)
        gpus.free(gpu.index, device)
        gpus.free_host(host)
    except CudaError as exc:
        _failed(gpu, gpus, "link", exc)


def _calibrate(gpus: _Gpus, ordinal: int, function: int, out: int, blocks: int, target_s: float) -> int:
    """Burn iterations for one batch of about ``target_s`` on this GPU."""
    iterations = 256
    for _ in range(4):
        t0 = gpus.env.clock()
        gpus.driver.use(ordinal)
        gpus.driver.launch(function, blocks, kernels.THREADS_PER_BLOCK, [ctypes.c_uint64(out), ctypes.c_uint32(iterations)])
        gpus.driver.synchronize()
        elapsed = gpus.env.clock() - t0
        if elapsed >= target_s / 2 or iterations >= MAX_BURN_ITERATIONS:
            break
        iterations = min(MAX_BURN_ITERATIONS, max(iterations * 2, int(iterations * target_s / max(elapsed, 1e-6))))
    return iterations


def _load(run: Run, gpus: _Gpus, options: Options, nvml_gpus: list[NvmlGpu | None], since_wall: float) -> None:
    env, driver = gpus.env, gpus.driver
    active: dict[int, tuple[int, int, int, int]] = {}  # ordinal -> (function, out, blocks, iterations)
    for gpu in run.gpus:
        nvml_gpu = nvml_gpus[gpu.index]
        gpu.load = nvml_gpu.limits(gpu.index) if nvml_gpu is not None else GpuLoad(index=gpu.index)
        if options.max_temp_c is not None:
            gpu.load.stop_at_c = options.max_temp_c
        elif gpu.load.slowdown_c is not None:
            gpu.load.stop_at_c = gpu.load.slowdown_c - options.temperature_margin_c
        if gpu.index in gpus.broken:
            gpu.errors["load"] = f"not run: {gpus.broken[gpu.index]}"
            continue
        try:
            blocks = gpus.grid(gpu)
            out = gpus.alloc(gpu.index, blocks * kernels.THREADS_PER_BLOCK * 4)
            function = gpus.function(gpu.index, kernels.BURN)
            active[gpu.index] = (function, out, blocks, _calibrate(gpus, gpu.index, function, out, blocks, options.batch_target_s))
        except CudaError as exc:
            _failed(gpu, gpus, "load", exc)

    seconds = options.minutes * 60

    def take(t: float) -> None:
        parts = []
        for gpu in run.gpus:
            nvml_gpu = nvml_gpus[gpu.index]
            if nvml_gpu is None or gpu.load is None:
                continue
            sample = nvml_gpu.sample(t)
            gpu.load.samples.append(sample)
            if sample.lost and gpu.index in active:
                gpu.errors["load"] = "NVML reports the GPU lost (fallen off the bus)"
                gpu.load.ran_s = round(t, 2)
                del active[gpu.index]
            stop_at = gpu.load.stop_at_c
            if stop_at is not None and sample.temperature_c is not None and sample.temperature_c >= stop_at \
                    and not run.stopped:
                run.stopped = f"GPU {gpu.index} reached {sample.temperature_c} °C, the stop temperature ({stop_at} °C)"
            parts.append(f"GPU {gpu.index} {_shown(sample.sm_clock_mhz, 'MHz')} {_shown(sample.power_w, 'W')} "
                         f"{_shown(sample.temperature_c, '°C')}")
        left = max(0, int(seconds - t))
        env.progress(f"sustained load: {left // 60}:{left % 60:02d} left  " + "  ".join(parts))

    ticker = Ticker(env.clock, take)
    ticker.poll()
    while active and not run.stopped and env.clock() - ticker.start < seconds:
        if env.interrupted():
            raise KeyboardInterrupt
        for ordinal, (function, out, blocks, iterations) in list(active.items()):
            try:
                driver.use(ordinal)
                driver.launch(function, blocks, kernels.THREADS_PER_BLOCK, [ctypes.c_uint64(out), ctypes.c_uint32(iterations)])
            except CudaError as exc:
                _stopped(run.gpus[ordinal], gpus, exc, env.clock() - ticker.start)
                del active[ordinal]
        for ordinal in list(active):
            try:
                driver.use(ordinal)
                driver.synchronize()
            except CudaError as exc:
                _stopped(run.gpus[ordinal], gpus, exc, env.clock() - ticker.start)
                del active[ordinal]
        ticker.poll()
    ended = env.clock() - ticker.start
    ticker.take(ended)  # the last reading, at the end of the load
    for gpu in run.gpus:
        if gpu.load is not None and gpu.index in active:
            gpu.load.ran_s = round(ended, 2)
    for gpu in run.gpus:
        nvml_gpu = nvml_gpus[gpu.index]
        if gpu.load is not None and nvml_gpu is not None:
            gpu.load.ecc_after = nvml_gpu.ecc_uncorrected()
        if gpu.index in active:
            try:
                gpus.free(gpu.index, active[gpu.index][1])
            except CudaError as exc:
                _failed(gpu, gpus, "load", exc)
    read_kernel_log(run, env.kernel_lines, since_wall)


def _stopped(gpu: GpuResult, gpus: _Gpus, exc: CudaError, after_s: float) -> None:
    _failed(gpu, gpus, "load", exc)
    if gpu.load is not None:
        gpu.load.ran_s = round(after_s, 2)


def read_kernel_log(run: Run, kernel_lines: Callable[[float], list[str] | str], since_wall: float) -> None:
    """The Xid and AER lines the kernel logged since the load started, classified into ``run``."""
    lines = kernel_lines(since_wall)
    if isinstance(lines, str):
        run.kernel_log = lines
        return
    from hostcheck.watch.xid import classify_line  # not on the container worker's path: it needs YAML

    for line in lines[-5000:]:
        detail = classify_line(line)
        if detail is not None and len(run.xid_lines) < MAX_KERNEL_LINES:
            run.xid_lines.append(detail)


def _nccl(run: Run, gpus: _Gpus, options: Options, usable: list[int]) -> None:
    """NCCL's all-reduce over every usable GPU, where its library is installed on the host."""
    from hostcheck.selftest.nccl import Nccl, NcclError

    library = gpus.env.find_library("nccl")
    if not library:
        run.nccl = "absent"
        return
    run.nccl = library
    held: list[tuple[int, int]] = []
    try:
        nccl = Nccl(library)
        run.nccl = f"NCCL {nccl.version()}"
        for ordinal in usable:
            held.append((ordinal, gpus.alloc(ordinal, options.peer_bytes)))
            held.append((ordinal, gpus.alloc(ordinal, options.peer_bytes)))
        buffers = [(held[2 * i][1], held[2 * i + 1][1]) for i in range(len(usable))]
        run.nccl_gbps = nccl.all_reduce(usable, buffers, options.peer_bytes // 4, gpus.driver.use,
                                        gpus.driver.synchronize, gpus.env.clock)
    except (NcclError, CudaError) as exc:
        run.nccl_error = str(exc)
    for ordinal, pointer in held:
        try:
            gpus.free(ordinal, pointer)
        except CudaError:
            pass  # left to the context's release


def _peers(run: Run, gpus: _Gpus, options: Options) -> None:
    driver = gpus.driver
    usable = [g.index for g in run.gpus if g.index not in gpus.broken]
    if len(usable) > 1:
        _nccl(run, gpus, options, usable)
    for a in usable:
        for b in usable:
            if a >= b:
                continue
            copy = PeerCopy(source=a, destination=b, peer_to_peer=False)
            run.peers.append(copy)
            try:
                copy.peer_to_peer = driver.can_access_peer(a, b)
                source = gpus.alloc(a, options.peer_bytes)
                destination = gpus.alloc(b, options.peer_bytes)
                copy.gbps = _rate(gpus, functools.partial(driver.copy_peer, destination, b, source, a, options.peer_bytes),
                                  options.peer_bytes, options)
                gpus.free(b, destination)
                gpus.free(a, source)
            except CudaError as exc:
                copy.error = str(exc)


def _shown(value: float | None, unit: str) -> str:
    return "?" if value is None else f"{value:g} {unit}"


def run_gpu_stages(run: Run, env: Environment, options: Options) -> Run:
    """Every GPU stage, in order, on every GPU the driver lists; ``run`` filled in."""
    driver = env.driver
    started = env.clock()
    since_wall = env.wall()
    held = _Held()
    gpus = _Gpus(env, held)
    try:
        try:
            driver.init()
            run.cuda_version = f"{driver.driver_version() // 1000}.{driver.driver_version() % 1000 // 10}"
            count = driver.device_count()
            infos = [driver.device_info(i) for i in range(min(count, 64))]
        except CudaError as exc:
            run.error = str(exc)
            return run
        for info in infos:
            run.gpus.append(GpuResult(index=info.ordinal, name=info.name, pci_bus_id=info.pci_bus_id,
                                      compute_capability=f"{info.compute_capability[0]}.{info.compute_capability[1]}",
                                      total_bytes=info.total_bytes, multiprocessors=info.multiprocessors))
        nvml_gpus: list[NvmlGpu | None] = [None] * len(infos)
        if env.nvml is not None:
            opened = open_gpus(env.nvml, [info.pci_bus_id for info in infos])
            if isinstance(opened, str):
                run.skipped["samples"] = opened
            else:
                nvml_gpus = opened
        else:
            run.skipped["samples"] = "NVML is not available (nvidia-ml-py missing)"
        for gpu in run.gpus:
            env.progress(f"VRAM: GPU {gpu.index}, allocating {options.vram_share:.0%} and checking a pattern")
            try:
                _vram(gpu, gpus, options)
            except CudaError as exc:
                _failed(gpu, gpus, "vram", exc)
        for gpu in run.gpus:
            if gpu.index in gpus.broken:
                gpu.errors["link"] = f"not run: {gpus.broken[gpu.index]}"
                continue
            env.progress(f"host-device link: GPU {gpu.index}, pinned copies both ways")
            _link(gpu, gpus, options, nvml_gpus[gpu.index])
        _load(run, gpus, options, nvml_gpus, since_wall)
        if len(run.gpus) > 1:
            env.progress("GPU to GPU copies")
            _peers(run, gpus, options)
        else:
            run.skipped["peers"] = "one GPU: nothing to copy between"
        return run
    finally:
        run.released = _release(driver, held)
        run.seconds = round(env.clock() - started, 1)


def _release(driver: Driver, held: _Held) -> bool:
    """Free in reverse order; then release the contexts (which frees what is left in them)."""
    clean = True
    for ordinal, pointer in reversed(held.device):
        try:
            driver.use(ordinal)
            driver.free(pointer)
        except CudaError:
            pass  # a context in error frees nothing by hand; releasing it below frees it all
    for pointer in reversed(held.host):
        try:
            driver.free_host(pointer)
        except CudaError:
            clean = False
    for ordinal, module in held.modules.items():
        try:
            driver.use(ordinal)
            driver.unload_module(module)
        except CudaError:
            pass  # released with its context below
    held.device.clear()
    held.host.clear()
    held.modules.clear()
    if driver.release():
        clean = False
    return clean
