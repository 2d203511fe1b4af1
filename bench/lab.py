"""Lab speed: rootfs build (cold and cached), per-host root copy vs overlay, boot-to-SSH per
lane, and the time for N = 1, 4, 8 parallel nspawn hosts to come up.

Run as root from the repository root:
    .venv/bin/python bench/lab.py            # everything except the cold debootstrap
    .venv/bin/python bench/lab.py --cold     # also a cold debootstrap (~75 s, uses the mirror)
    .venv/bin/python bench/lab.py --no-vm --json out.json
    .venv/bin/python bench/lab.py --suite trixie --no-vm   # the Debian 13 rootfs and hosts
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.lab.rootfs import SUITE, SUITES, ensure_rootfs
from tests.lab.session import Lab
from tests.lab.vm import ensure_vm_image


def timed(fn: Any) -> tuple[Any, float]:
    started = time.monotonic()
    value = fn()
    return value, time.monotonic() - started


def with_cache(folder: Path, fn: Any) -> Any:
    old = os.environ.get("HOSTCHECK_LAB_CACHE")
    os.environ["HOSTCHECK_LAB_CACHE"] = str(folder)
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["HOSTCHECK_LAB_CACHE"]
        else:
            os.environ["HOSTCHECK_LAB_CACHE"] = old


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", action="store_true", help="also time a cold debootstrap")
    parser.add_argument("--no-vm", action="store_true")
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--suite", default=SUITE, choices=sorted(SUITES), help="Debian suite of the rootfs")
    args = parser.parse_args()
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "suite": args.suite,
                               "loadavg_at_start": " ".join(Path("/proc/loadavg").read_text().split()[:3])}
    suite_rootfs = functools.partial(ensure_rootfs, suite=args.suite)

    rootfs, cached_s = timed(suite_rootfs)
    figures["rootfs_cached_s"] = round(cached_s, 3)
    figures["rootfs_origin_first_call"] = rootfs.origin
    figures["rootfs_tarball_mib"] = round(rootfs.tarball.stat().st_size / 2**20)
    scratch = Path(tempfile.mkdtemp(prefix="hcl-bench-", dir="/var/tmp"))
    try:
        if args.cold:
            cold_cache = scratch / "cold"
            cold_cache.mkdir()
            built = with_cache(cold_cache, suite_rootfs)
            figures["rootfs_cold_build_s"] = round(built.seconds, 1)
            shutil.rmtree(cold_cache)
        # from the tarball alone, as on a CI run that restored only the cached artifact
        tar_cache = scratch / "from-tarball"
        tar_cache.mkdir()
        os.link(rootfs.tarball, tar_cache / rootfs.tarball.name)
        extracted = with_cache(tar_cache, suite_rootfs)
        figures["rootfs_from_tarball_s"] = round(extracted.seconds, 1)
        if not args.no_vm and args.suite == SUITE:
            image = with_cache(tar_cache, lambda: ensure_vm_image(extracted))
            figures["vm_image_build_s"] = round(image.seconds, 1)
        shutil.rmtree(tar_cache)
        # what an overlay saves: a private full copy per host
        _, copy_s = timed(lambda: subprocess.run(["cp", "-a", str(rootfs.base), str(scratch / "copy")], check=True))
        figures["per_host_full_copy_s"] = round(copy_s, 2)
        figures["rootfs_size_mib"] = int(subprocess.run(["du", "-sm", str(rootfs.base)], capture_output=True,
                                                        text=True).stdout.split()[0])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    figures["loadavg_at_end_of_builds"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lab = Lab(rootfs)
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            hosts, seconds = timed(functools.partial(lab.start_hosts, n))
            to_ssh = [h.timings["stage"] + h.timings["network"] + h.timings["spawn"] + h.timings["to_ssh"]
                      for h in hosts]
            figures[f"nspawn_n{n}_all_up_s"] = round(seconds, 2)
            figures[f"nspawn_n{n}_boot_to_ssh_median_s"] = round(statistics.median(to_ssh), 2)
            figures[f"nspawn_n{n}_boot_to_ssh_max_s"] = round(max(to_ssh), 2)
            _, stop_s = timed(functools.partial(lab.stop_hosts, hosts))
            figures[f"nspawn_n{n}_teardown_s"] = round(stop_s, 2)
        host = lab.start_hosts(1)[0]
        _, ssh_s = timed(lambda: host.run("true", check=True))
        figures["nspawn_ssh_command_s"] = round(ssh_s, 3)
        lab.stop_hosts([host])
        if not args.no_vm and args.suite == SUITE:
            vm, vm_s = timed(lab.start_vm)
            figures["vm_boot_to_ssh_s"] = round(vm.boot_seconds[0], 1)
            figures["vm_start_total_s"] = round(vm_s, 1)
            _, ssh_s = timed(lambda: vm.run("true", check=True))
            figures["vm_ssh_command_s"] = round(ssh_s, 3)
            figures["vm_power_cycle_boot_s"] = round(vm.power_cycle(), 1)
            _, stop_s = timed(lambda: lab.stop_hosts([vm]))
            figures["vm_teardown_s"] = round(stop_s, 2)
    finally:
        lab.close()

    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
