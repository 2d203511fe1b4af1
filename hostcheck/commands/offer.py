"""``hostcheck offer``: the offer a Vast renter would see, and the power hosting draws."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hostcheck.collectors.disk_bw import DEFAULT_SIZE_MIB, MAX_SIZE_MIB, MIN_SIZE_MIB, check_size_mib
from hostcheck.collectors.power_draw import MAX_SAMPLE_S
from hostcheck.commands.common import (
    DEFAULT_FORMAT,
    FormatName,
    OutputOpt,
    check_output,
    collect_live,
    emit,
    format_option,
)
from hostcheck.commands.live import (
    DEFAULT_SPEED_MAX_MB,
    LIVE_DEFAULTS,
    LiveOptions,
    SpeedMaxMbOpt,
    SpeedSecondsOpt,
    add_bandwidth,
    live_options,
    speedtest_caps,
)
from hostcheck.errors import UsageError
from hostcheck.measure.power_estimate import check_sample_seconds, check_wall_pair, check_wall_reading
from hostcheck.netprobe.speedtest import DEFAULT_SECONDS as DEFAULT_SPEED_SECONDS
from hostcheck.render.formats import Kind


@live_options
def offer(
    fmt: Annotated[FormatName, format_option(Kind.OFFER)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Preview from a saved facts snapshot (measures nothing).")] = None,
    no_disk_bw: Annotated[bool, typer.Option("--no-disk-bw", help="Do not measure disk_bw (writes nothing).")] = False,
    disk_dir: Annotated[Path | None, typer.Option("--disk-dir", help="Measure disk_bw in this directory instead of Docker's data root (the output says so).")] = None,
    disk_size_mib: Annotated[int, typer.Option("--disk-size-mib", help=f"Size of the disk_bw test file, MiB ({MIN_SIZE_MIB}-{MAX_SIZE_MIB}).")] = DEFAULT_SIZE_MIB,
    power_seconds: Annotated[float, typer.Option("--power-seconds", help=f"Sample power at idle for this long, seconds (0: no sampling, at most {MAX_SAMPLE_S:g}).")] = 2.0,
    wall_idle_w: Annotated[float | None, typer.Option("--wall-idle-w", help="Your wall-socket (smart plug) reading at idle, watts.")] = None,
    wall_load_w: Annotated[float | None, typer.Option("--wall-load-w", help="Your wall-socket (smart plug) reading under GPU load, watts.")] = None,
    live: LiveOptions = LIVE_DEFAULTS,  # the live-collection options, declared once (live_options)
    speedtest: Annotated[bool, typer.Option("--speedtest", help="Also measure inet_down/inet_up against the --probe server (bulk traffic, capped).")] = False,
    speedtest_seconds: SpeedSecondsOpt = DEFAULT_SPEED_SECONDS,
    speedtest_max_mb: SpeedMaxMbOpt = DEFAULT_SPEED_MAX_MB,
    details: Annotated[bool, typer.Option("--details", help="Also each field's label and how it was read, Vast's definitions, the power's derivation and the sources.")] = False,
) -> None:
    """The offer a Vast renter would see: Vast's fields, each labelled measured, from the system, or
    not measurable before listing, with Vast's definition and source; and the power hosting draws.

    NOT read-only: measuring disk_bw writes a test file of --disk-size-mib in Docker's data root
    (or its nearest existing parent), runs Vast's fio read job on it for about a second, and
    removes it, also on failure or timeout. --no-disk-bw writes nothing. `hostcheck audit` never
    does this. Needs fio (`sudo apt install fio`)."""
    from hostcheck.facts import load_snapshot
    from hostcheck.measure.offer import build_offer
    from hostcheck.measure.power_estimate import estimate_power
    from hostcheck.render.formats import Options, render

    check_output(output)
    check_wall_reading(wall_idle_w, "--wall-idle-w")
    check_wall_reading(wall_load_w, "--wall-load-w")
    check_wall_pair(wall_idle_w, wall_load_w, "--wall-idle-w", "--wall-load-w")
    check_sample_seconds(power_seconds, "--power-seconds")
    check_size_mib(disk_size_mib, "--disk-size-mib")
    if disk_dir is not None and not disk_dir.is_dir():
        raise UsageError(f"--disk-dir {disk_dir}: not an existing directory")
    if facts_file is not None and (speedtest or disk_dir is not None):
        raise UsageError("--speedtest and --disk-dir measure this machine; they cannot be combined with --facts")
    if facts_file is not None:
        facts = load_snapshot(facts_file)
    else:
        ctx = live.context()
        caps = speedtest_caps(speedtest, live.offline, live.probe, speedtest_seconds, speedtest_max_mb)
        facts = collect_live(ctx, show_progress=False)
        if caps is not None:
            add_bandwidth(facts, ctx, caps)
    measured_here = facts_file is None
    readings = None
    if measured_here and power_seconds:
        from hostcheck.collectors.power_draw import sample_power

        readings = sample_power(power_seconds)
    power = estimate_power(facts, readings=readings, wall_idle_w=wall_idle_w, wall_load_w=wall_load_w)
    disk = None
    if measured_here and not no_disk_bw:
        disk = _measure_disk_bw(facts, disk_dir, disk_size_mib)
    hint = "judging a snapshot (--facts); run `hostcheck offer` on the machine" if not measured_here else "--no-disk-bw"
    emit(render(Kind.OFFER, build_offer(facts, disk=disk, power=power, disk_hint=hint), fmt, Options(details=details)), output)


def _measure_disk_bw(facts: dict[str, Any], disk_dir: Path | None, size_mib: int) -> Any:
    from hostcheck.collectors.disk_bw import DiskBandwidth, measure_disk_bw, target_directory
    from hostcheck.facts import Unknown

    if disk_dir is not None:
        where: Any = (str(disk_dir), f"in {disk_dir} as asked (--disk-dir), not necessarily Docker's data root")
    else:
        storage = facts.get("storage")
        docker_root = storage.get("docker_root") if isinstance(storage, dict) else storage
        path = docker_root.get("path") if isinstance(docker_root, dict) else docker_root
        where = target_directory(path if isinstance(path, (str, Unknown)) else Unknown("not collected"))
    if isinstance(where, Unknown):
        return DiskBandwidth(where, None, "")
    return measure_disk_bw(where[0], where[1], size_mib=size_mib)
