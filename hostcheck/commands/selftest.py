"""``hostcheck selftest``: what the platform's own load test will do to the GPU, before listing.
Option parsing and wiring; the stages are hostcheck/selftest/."""

from __future__ import annotations

import ctypes.util
import datetime as dt
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from hostcheck.commands.common import DEFAULT_FORMAT, FormatName, OutputOpt, check_output, emit, format_option
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_INTERRUPTED, EXIT_NOT_FEASIBLE, EXIT_OK
from hostcheck.render.formats import Kind, render
from hostcheck.selftest.rules import rules

MAX_MINUTES = 60.0
HANG_MARGIN_S = 120.0
"""Past the longest the run can take, plus this, a driver call has stopped answering (a GPU that
fell off the bus can leave one blocked for good): the process ends, and the kernel driver frees
what it held."""
STRESS_MINUTES = rules()["stress_seconds"].value / 60


def _help() -> str:
    from hostcheck.selftest.stages import LINK_BUDGET_S

    r = rules()
    return f"""Load the GPU as Vast's self-test will after listing, and say whether it would pass.

    NOT read-only, and never part of `audit`: it allocates most of each GPU's memory and runs
    it at full load. It changes no clock, power limit, persistence mode or driver setting.

    \b
    Stages, in Vast's order; each gives findings (measured, requirement, source):
    1. preflight: the audit's Vast gates on facts collected now (seconds)
    2. VRAM: allocate {r['vram_share'].value:.0%} of each GPU's memory (Vast's ECC stage, draft docs),
       write a pattern, read it back, count the words that differ, free (seconds)
    3. host-device link: pinned copies both ways, GB/s per GPU, against Vast's
       pcie_bw gate (> {r['pcie_bw_gbps'].value:g} GB/s, vast-cli), beside NVML's PCIe generation
       and width (at most {2 * LINK_BUDGET_S:g} s per GPU)
    4. sustained load: a compute kernel on every GPU for --minutes (Vast's stress
       stage runs {r['stress_seconds'].value:g} s, draft docs), NVML read every second: SM clock
       against its maximum (held: at least {r['clock_share'].value:.0%}, hostcheck's choice), power
       against the limit, temperature against the slowdown threshold, what slowed
       the card, ECC counters before and after, the Xid lines the kernel logged
    5. several GPUs: copies between each pair, peer-to-peer where allowed, and
       NCCL's all-reduce where its library is installed (seconds)

    Refuses while a rental or provider container runs, while another program uses a GPU, on
    battery, or when the audit rates the owner risk high (unless --accept-owner-risk). Asks
    before it starts (unless --yes), shows the time it will take, stops at --max-temp or
    Ctrl-C (exit 130) and always frees what it allocated. Exit 0: every stage passed; 3: a
    stage failed or could not be judged, or it did not start (it says why). Needs the NVIDIA
    driver (libcuda.so.1) and nvidia-ml-py; no CUDA toolkit, no framework. The sources and
    each stage's time: docs/selftest.md."""


@dataclass
class Deps:
    """What the command touches, replaceable in tests (stand-ins for the GPU, NVML, the host)."""

    collect: Callable[[], dict[str, Any]]
    nvml: Any
    driver: Callable[[], Any]
    kernel_lines: Callable[[float], list[str] | str]
    confirm: Callable[[str], bool]
    progress: Callable[[str], None]
    in_container: Callable[[str, str, float, Callable[[str], None]], Any] = field(default=lambda *job: _docker(*job))
    interrupted: Callable[[], bool] = field(default=lambda: False)
    find_library: Callable[[str], str | None] = field(default=ctypes.util.find_library)
    on_hang: Callable[[str], None] = field(default=lambda message: _hard_stop(message))
    hang_margin_s: float = HANG_MARGIN_S
    cuda_library: str = "libcuda.so.1"


@dataclass
class Request:
    minutes: float
    max_temp: int | None
    yes: bool
    accept_owner_risk: bool
    in_container: str | None = None


def selftest(
    fmt: Annotated[FormatName, format_option(Kind.SELFTEST)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    minutes: Annotated[float, typer.Option("--minutes", help=f"Length of the sustained load, minutes (1-{MAX_MINUTES:g}; default: Vast's stress stage).")] = STRESS_MINUTES,
    max_temp: Annotated[int | None, typer.Option("--max-temp", help="Stop when a GPU reaches this temperature, °C (default: its slowdown temperature less 5).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Start without asking.")] = False,
    accept_owner_risk: Annotated[bool, typer.Option("--accept-owner-risk", help="Run even where the audit rates the owner risk high.")] = False,
    in_container: Annotated[str | None, typer.Option("--in-container", help="Run the stages inside IMAGE, started through Docker with --gpus all as a renter's job starts (the image needs python3 3.11+; it is never pulled).")] = None,
    watch_db: Annotated[Path | None, typer.Option("--watch-db", help="Store the run's result as an event in this `hostcheck watch` database.")] = None,
    cuda_library: Annotated[str, typer.Option("--cuda-library", hidden=True, help="The CUDA driver library to load.")] = "libcuda.so.1",
) -> None:
    check_output(output)
    if not minutes == minutes or not 1 <= minutes <= MAX_MINUTES:  # NaN too
        raise UsageError(f"--minutes must be from 1 to {MAX_MINUTES:g}, not {minutes}")
    if max_temp is not None and not 30 <= max_temp <= 110:
        raise UsageError(f"--max-temp must be from 30 to 110 °C, not {max_temp}")
    if in_container is not None:
        from hostcheck.selftest.container import image_problem

        if problem := image_problem(in_container):
            raise UsageError(f"--in-container: {problem}")
    if watch_db is not None and watch_db.exists() and not watch_db.is_file():
        raise UsageError(f"--watch-db {watch_db}: not a regular file")
    request = Request(minutes, max_temp, yes, accept_owner_risk, in_container)
    code, text, event = execute(request, real_deps(cuda_library), fmt)
    emit(text, output)
    if watch_db is not None and event is not None:
        _store(watch_db, event)
    raise typer.Exit(code)


def real_deps(cuda_library: str) -> Deps:
    from hostcheck.collectors import CollectContext, collect_facts
    from hostcheck.collectors.gpu import load_nvml
    from hostcheck.facts import Unknown
    from hostcheck.selftest.cuda import Driver
    from hostcheck.selftest.kernel_log import journal_kernel_lines

    nvml = load_nvml()
    return Deps(
        collect=lambda: collect_facts(CollectContext(offline=True)),
        nvml=None if isinstance(nvml, Unknown) else nvml,
        driver=lambda: Driver(cuda_library),
        cuda_library=cuda_library,
        kernel_lines=journal_kernel_lines,
        confirm=lambda question: sys.stdin.isatty() and typer.confirm(question, default=False, err=True),
        progress=_progress_line(),
    )


def _progress_line() -> Callable[[str], None]:
    tty = sys.stderr.isatty()

    def show(line: str) -> None:
        from hostcheck.render.escape import escape_text

        shown = escape_text(line)
        if tty:  # one line, rewritten in place: cut to the terminal's width
            sys.stderr.write(f"\r\x1b[K{shown[:79]}")
        elif shown:
            sys.stderr.write(shown + "\n")
        sys.stderr.flush()

    return show


def execute(request: Request, deps: Deps, fmt: str) -> tuple[int, str, dict[str, Any] | None]:
    """The whole command after its options: (exit code, what to print, the event --watch-db
    stores; None when nothing ran)."""
    from hostcheck.policy import load_shipped
    from hostcheck.render.views import SelftestView
    from hostcheck.report import build_report
    from hostcheck.selftest import safety
    from hostcheck.selftest.results import Run
    from hostcheck.selftest.sampler import open_gpus
    from hostcheck.selftest.stages import Options, estimate_seconds
    from hostcheck.selftest.verdict import exit_status, judge

    run = Run(started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), minutes=request.minutes)
    deps.progress("preflight: collecting facts for the audit's Vast gates")
    facts = deps.collect()
    report = build_report(facts, [load_shipped("vast")])
    vast = report.policies[0]
    run.preflight = {"blockers": vast.blockers, "unknowns": vast.unknowns, "verdict": vast.verdict.value,
                     "owner_risk": report.owner_risk.rating.value}
    gpu_facts = facts.get("gpu")
    if isinstance(gpu_facts, dict) and isinstance(gpu_facts.get("driver_version"), str):
        run.driver_version = gpu_facts["driver_version"]
    busy: dict[int, list[int]] = {}
    count = len(gpu_facts.get("devices") or []) if isinstance(gpu_facts, dict) and isinstance(gpu_facts.get("devices"), list) else 0
    if deps.nvml is not None:
        opened = open_gpus(deps.nvml, [])
        if not isinstance(opened, str):
            for index in range(min(int(deps.nvml.nvmlDeviceGetCount()), 64)):
                from hostcheck.selftest.sampler import NvmlGpu

                pids = NvmlGpu(deps.nvml, deps.nvml.nvmlDeviceGetHandleByIndex(index)).compute_processes()
                busy[index] = pids or []
            count = max(count, len(busy))
    reasons = safety.refusals(facts, busy, report.owner_risk.rating, request.accept_owner_risk)
    if reasons:
        return EXIT_NOT_FEASIBLE, render(Kind.SELFTEST, SelftestView(run, refused=reasons), fmt), None
    about, most = estimate_seconds(max(count, 1), request.minutes)
    gpus = "every GPU" if count == 0 else ("the GPU" if count == 1 else f"all {count} GPUs")
    plan = (f"The self-test runs {gpus} at full load for {request.minutes:g} min; about {_mmss(about)} "
            f"in all, at most {_mmss(most)}. Ctrl-C stops it.")
    if not request.yes and not deps.confirm(plan + " Start?"):
        return EXIT_NOT_FEASIBLE, "hostcheck selftest did not start: not confirmed (give --yes to start without asking)\n", None
    deps.progress(plan)
    r = rules()
    options = Options(minutes=request.minutes, vram_share=r["vram_share"].value, max_temp_c=request.max_temp,
                      temperature_margin_c=int(r["temperature_margin_c"].value))
    if request.in_container:
        interrupted, container = _in_container(run, request.in_container, deps, options, most + deps.hang_margin_s)
    else:
        interrupted, container = _on_host(run, deps, options, most + deps.hang_margin_s), ""
    verdict = judge(run)
    if container:
        verdict.headline[:] = _not_started(request.in_container or "", container)
    deps.progress("")
    event = _event(run, verdict)
    text = render(Kind.SELFTEST, SelftestView(run, verdict), fmt)
    if interrupted:
        return EXIT_INTERRUPTED, text, event
    passed = exit_status(verdict) and not container
    return (EXIT_OK if passed else EXIT_NOT_FEASIBLE), text, event


def _on_host(run: Any, deps: Deps, options: Any, limit: float) -> bool:
    """The stages in this process; True when Ctrl-C stopped them."""
    from hostcheck.selftest.cuda import CudaUnavailable
    from hostcheck.selftest.stages import Environment, run_gpu_stages

    try:
        driver = deps.driver()
    except CudaUnavailable as exc:
        run.error = str(exc)
        return False
    env = Environment(driver=driver, nvml=deps.nvml, kernel_lines=deps.kernel_lines, progress=deps.progress,
                      interrupted=deps.interrupted, find_library=deps.find_library)
    watchdog = threading.Timer(limit, deps.on_hang, [
        f"a GPU driver call did not return within {limit:.0f} s (the run's longest time and a margin): "
        "the GPU has stopped answering. Stopping; the driver frees what this process held when it ends. "
        "Look at the kernel log for an Xid (journalctl -k)."])
    watchdog.daemon = True
    watchdog.start()
    try:
        run_gpu_stages(run, env, options)
    except KeyboardInterrupt:
        run.stopped = "interrupted (Ctrl-C)"
        return True
    finally:
        watchdog.cancel()
    return False


def _in_container(run: Any, image: str, deps: Deps, options: Any, limit: float) -> tuple[bool, str]:
    """The stages inside ``image``: (stopped by Ctrl-C, Docker's own error when it did not start)."""
    import time

    from hostcheck.selftest.container import job, merge
    from hostcheck.selftest.stages import read_kernel_log

    deps.progress(f"container: starting {image} with --gpus all")
    since = time.time()
    outcome = deps.in_container(image, job(options.minutes, options.vram_share, options.max_temp_c,
                                           options.temperature_margin_c, deps.cuda_library), limit, deps.progress)
    run.preflight["container"] = {"image": image, "started": outcome.started,
                                  "error": "" if outcome.started else outcome.error}
    if not outcome.started:
        return False, outcome.error
    if outcome.run is not None:
        merge(run, outcome.run)
    if outcome.error:
        run.error = outcome.error
    read_kernel_log(run, deps.kernel_lines, since)
    if outcome.interrupted:
        run.stopped = run.stopped or "interrupted (Ctrl-C)"
    return outcome.interrupted, ""


def _docker(image: str, job: str, limit: float, progress: Callable[[str], None]) -> Any:
    from hostcheck.selftest.container import run_in_container

    return run_in_container(image, job, limit, progress)


def _not_started(image: str, error: str) -> list[str]:
    if "device driver" in error or "nvidia" in error.lower():
        fix = ("install the NVIDIA Container Toolkit and register it with Docker (sudo nvidia-ctk runtime configure "
               "--runtime=docker, then restart Docker), and rerun")
    elif "find image" in error or "No such image" in error:
        fix = f"pull the image first (docker pull {image}); the self-test never pulls one"
    else:
        fix = "fix what Docker said, and rerun"
    return [f"The container did not start through Docker with --gpus all: {error}",
            "What it means: a renter's job would not start either (Vast's self-test reports it as "
            "daemon_startup_failed or nvml_failed).", f"What to do: {fix}."]


def _hard_stop(message: str) -> None:
    """The watchdog's end: from its own thread, as the main one is blocked inside the driver."""
    sys.stderr.write(f"\nhostcheck: error: {message}\n")
    sys.stderr.flush()
    os._exit(EXIT_NOT_FEASIBLE)


def _mmss(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 60} min {s % 60:02d} s"


def _event(run: Any, verdict: Any) -> dict[str, Any]:
    return {
        "first_failed_stage": verdict.first_failed,
        "passed": verdict.first_failed is None and not verdict.unjudged,
        "minutes": run.minutes,
        "stopped": run.stopped,
        "in_container": run.preflight.get("container", {}).get("image"),
        "gpus": [{"index": g.index, "name": g.name[:60], "h2d_gbps": g.h2d_gbps, "d2h_gbps": g.d2h_gbps,
                  "pattern_errors": g.pattern_errors} for g in run.gpus[:16]],
    }


def _store(path: Path, detail: dict[str, Any]) -> None:
    import time

    from hostcheck.recording.store import Event, WatchWriter

    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii")[:64].strip()
    except OSError:
        boot_id = ""
    try:
        with WatchWriter(path) as writer:
            writer.add_event(Event(t=time.time(), kind="selftest", boot_id=boot_id, detail=detail))
    except (OSError, ValueError) as exc:
        from hostcheck.commands.common import die

        die(f"--watch-db {path}: the run was not stored: {exc}")
    typer.echo(f"hostcheck: stored the run in {path}", err=True)


selftest.__doc__ = _help()
