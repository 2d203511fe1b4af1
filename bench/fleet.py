#!/usr/bin/env python3
"""The fleet at scale, two ways.

1. Wall time of `playbooks/audit.yml` (hostcheck audit --offline on every host, reports
   fetched) for 1, 4 and 8 nspawn lab hosts, and the 8-host / 1-host ratio (target: <= 2x).
   Needs root (lab hosts).

       sudo .venv/bin/python bench/fleet.py [--sizes 1,4,8] [--runs 3]

2. `hostcheck fleet DIR` (the table, as JSON) over generated report directories: wall time
   and the command's peak RSS for each count of reports. The reports are real audit reports
   (`hostcheck audit --facts` on four of the test snapshots, ~250 KB each), copied under as
   many host names as asked. No root, no lab.

       .venv/bin/python bench/fleet.py --reports 500,3000

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

AUDIT_EXTRA_ARGS = ["--offline"]
REPO = Path(__file__).resolve().parents[1]
SNAPSHOTS = ["dedicated-4090.json", "reference-laptop.json", "hgx-h100-8x.json", "salad-debian-3080-stock.json"]


def fleet_table_scale(counts: list[int]) -> int:
    with tempfile.TemporaryDirectory(prefix="hostcheck-bench-fleet-") as tmp:
        work = Path(tmp)
        models = []
        for name in SNAPSHOTS:
            out = work / f"model-{name}"
            proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", "audit", "--facts", str(REPO / "tests" / "snapshots" / name),
                                   "--format", "json", "-o", str(out)], capture_output=True, text=True, cwd=REPO)
            if not out.exists():
                print(proc.stderr, file=sys.stderr)
                return 1
            models.append(out)
        size = statistics.mean(m.stat().st_size for m in models)
        print(f"report size: {size / 1024:.0f} KB on average ({len(models)} different reports)")
        for count in counts:
            reports = work / f"n{count}"
            reports.mkdir()
            for n in range(count):
                shutil.copyfile(models[n % len(models)], reports / f"host{n:05d}.json")
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "hostcheck.cli", "fleet", str(reports), "--format", "json",
                                     "-o", str(work / f"table{count}.json")], cwd=REPO, stderr=subprocess.PIPE)
            _pid, status, usage = os.wait4(proc.pid, 0)
            seconds = time.monotonic() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode not in (0, 4):
                print(proc.stderr.read().decode() if proc.stderr else "", file=sys.stderr)
                return 1
            print(f"hostcheck fleet, {count} reports: {seconds:.1f} s, peak RSS {usage.ru_maxrss / 1024:.0f} MiB")
            shutil.rmtree(reports)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reports", help="counts of generated reports for `hostcheck fleet` (e.g. 500,3000)")
    args = parser.parse_args()
    if args.reports:
        return fleet_table_scale([int(n) for n in args.reports.split(",")])
    from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
    from tests.lab.rootfs import ensure_rootfs
    from tests.lab.session import Lab
    from tests.lanes.profile.play import run_playbook

    sizes = [int(s) for s in args.sizes.split(",")]
    lab = Lab(ensure_rootfs())
    figures: dict[int, float] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hostcheck-bench-fleet-") as tmp:
            work = Path(tmp)
            wheelhouse = build_wheelhouse(work / "wheels")
            hosts = lab.start_hosts(max(sizes), boot_timeout=120)

            def install(host: object) -> None:
                install_hostcheck(host, wheelhouse)  # type: ignore[arg-type]
                host.sudo(f"ln -sf {VENV}/bin/hostcheck /usr/local/bin/hostcheck", check=True)  # type: ignore[attr-defined]

            with ThreadPoolExecutor(len(hosts)) as pool:
                list(pool.map(install, hosts))
            for size in sizes:
                inventory = work / f"n{size}.ini"
                lines = ["[lab]"]
                for host in hosts[:size]:
                    lines += [ln for ln in host.inventory_path.read_text().splitlines() if ln and not ln.startswith("[")]
                inventory.write_text("\n".join(lines) + "\n")
                samples = []
                for run in range(args.runs):
                    result = run_playbook(inventory, "audit.yml", timeout=600, extra_vars={
                        "audit_report_dir": str(work / f"n{size}-{run}"), "audit_extra_args": AUDIT_EXTRA_ARGS})
                    if result.rc != 0:
                        print(result.tail(), file=sys.stderr)
                        return 1
                    samples.append(result.seconds)
                figures[size] = statistics.median(samples)
                print(f"audit.yml, {size} host(s): median {figures[size]:.2f} s  ({', '.join(f'{s:.2f}' for s in samples)})")
    finally:
        lab.close()
    if 1 in figures and max(sizes) in figures:
        print(f"{max(sizes)} hosts / 1 host: {figures[max(sizes)] / figures[1]:.2f}x (target <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
