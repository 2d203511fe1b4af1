#!/usr/bin/env python3
"""Median wall time of `hostcheck audit --offline`, `hostcheck --help` and `lynis audit system
--quick`, side by side in one run on the same machine, and their ratio.

    .venv/bin/python bench/audit.py [--runs 5] [--lynis-runs 1]

Figures are printed, never asserted: speed is measured here, not in tests.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(argv: list[str], runs: int) -> tuple[float, list[float]]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=REPO)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lynis-runs", type=int, default=1, help="lynis takes about a minute per run")
    args = parser.parse_args()
    hostcheck = [sys.executable, "-m", "hostcheck.cli"]
    rows = []
    audit, audit_samples = timed([*hostcheck, "audit", "--offline"], args.runs)
    rows.append(("hostcheck audit --offline", audit, audit_samples, 1.5))
    help_time, help_samples = timed([*hostcheck, "--help"], args.runs)
    rows.append(("hostcheck --help", help_time, help_samples, 0.3))
    lynis = shutil.which("lynis")
    if lynis:
        lynis_time, lynis_samples = timed(
            [lynis, "audit", "system", "--quick", "--no-colors", "--no-log"], args.lynis_runs
        )
        rows.append(("lynis audit system --quick", lynis_time, lynis_samples, None))
    print(f"{'command':32} {'median s':>9} {'target s':>9}  samples")
    for name, median, samples, target in rows:
        target_text = f"{target:.2f}" if target else "-"
        print(f"{name:32} {median:9.3f} {target_text:>9}  {', '.join(f'{s:.3f}' for s in samples)}")
    if lynis:
        print(f"\nlynis / hostcheck audit: {lynis_time / audit:.0f}x")
    else:
        print("\nlynis not installed (apt-get install lynis): no comparison")
    return 0


if __name__ == "__main__":
    sys.exit(main())
