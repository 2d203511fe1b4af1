#!/usr/bin/env python3
"""Median wall time of `hostcheck earnings` without power sampling: from flags alone and from a
facts snapshot (which also judges the audit, for the headline), as a fresh process and in-process,
side by side in one run with the floor every Python command pays: `python3 -c` computing the same
formula with nothing imported.

    .venv/bin/python bench/earnings.py [--runs 7]

Figures are printed, never asserted: speed is measured here, not in tests.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FLAGS = ["--wall-idle-w", "50", "--wall-load-w", "450", "--electricity", "07-23=0.32,23-07=0.18", "--price", "0.25",
         "--occupancy", "50", "--heating", "heat-pump", "--cooling-months", "6-8"]
SNAPSHOT = ["--facts", str(REPO / "tests" / "snapshots" / "reference-laptop.json"), "--electricity", "0.30",
            "--price", "0.10", "--occupancy", "30", "--heating", "gas", "--fuel-price", "0.08"]
FORMULA = ("H=730;u=.5;k=H*(u*450+(1-u)*50)/1000;e=(16*.32+8*.18)/24;"
           "print(.25*u*H-k*e+k*.7*e/2.8)")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], runs: int) -> tuple[float, float, list[float]]:
    """Median wall seconds, median CPU seconds (user + system: what a busy machine does not
    inflate as much), and the wall samples."""
    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent"}
    samples, cpu = [], []
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), _children_cpu()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=REPO, env=env)
        samples.append(time.perf_counter() - started)
        cpu.append(_children_cpu() - cpu_started)
    return statistics.median(samples), statistics.median(cpu), samples


def in_process(args: list[str], runs: int) -> tuple[float, float, list[float]]:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    runner = CliRunner()
    runner.invoke(app, ["earnings", *args], env={"XDG_CONFIG_HOME": "/nonexistent"})  # imports, once
    samples, cpu = [], []
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), _self_cpu()
        result = runner.invoke(app, ["earnings", *args], env={"XDG_CONFIG_HOME": "/nonexistent"})
        samples.append(time.perf_counter() - started)
        cpu.append(_self_cpu() - cpu_started)
        if result.exit_code not in (0, 4):  # 4: priced, but the audit's owner risk is high
            raise SystemExit(f"earnings {' '.join(args)} exited {result.exit_code}: {result.output}")
    return statistics.median(samples), statistics.median(cpu), samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    hostcheck = [sys.executable, "-m", "hostcheck.cli", "earnings"]
    rows = [
        ("python3 -c <the formula> (floor)", *timed([sys.executable, "-c", FORMULA], args.runs)),
        ("earnings, flags only (process)", *timed([*hostcheck, *FLAGS], args.runs)),
        ("earnings --facts (process)", *timed([*hostcheck, *SNAPSHOT], args.runs)),
        ("earnings, flags only (in-process)", *in_process(FLAGS, args.runs)),
        ("earnings --facts (in-process)", *in_process(SNAPSHOT, args.runs)),
    ]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'command':38} {'wall s':>7} {'CPU s':>7}  wall samples")
    for name, median, cpu, samples in rows:
        print(f"{name:38} {median:7.3f} {cpu:7.3f}  {', '.join(f'{s:.3f}' for s in samples)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
