#!/usr/bin/env python3
"""Wall time of `playbooks/audit.yml` (hostcheck audit --offline on every host, reports fetched)
for 1, 4 and 8 nspawn lab hosts, and the 8-host / 1-host ratio (target: <= 2x).

    sudo .venv/bin/python bench/fleet.py [--sizes 1,4,8] [--runs 3]

Needs root (lab hosts). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.rootfs import ensure_rootfs
from tests.lab.session import Lab
from tests.profile.play import run_playbook

AUDIT_EXTRA_ARGS = ["--offline"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
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
