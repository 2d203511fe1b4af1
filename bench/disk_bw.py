#!/usr/bin/env python3
"""hostcheck's disk_bw next to Vast's fio read job run by hand, on the same file in the same run,
for several rounds (alternating which goes first); and the wall time of the offer preview.

    .venv/bin/python bench/disk_bw.py [--dir DIR] [--rounds 5] [--size-mib 256] [--verbatim]

"By hand" is the command line of Vast's host script (send_mach_info.py), as read in a
third-party copy of that script (hostcheck/collectors/disk_bw.py says which and why), run through the
shell, its human output parsed the way that script parses it (the text after the first "bw="
up to "MiB/s", GiB/s times 1024); only --directory/--size are replaced by --filename/--size of
the shared test file so that both read the same blocks. --verbatim also runs Vast's line
unchanged in a scratch directory under DIR (fio lays out 16 files of 128 MiB there: 2 GiB
written, removed afterwards). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hostcheck.collectors.disk_bw import MIB, run_fio, target_directory
from hostcheck.facts import Unknown

# Vast's read job as send_mach_info.py has it (without its leading sudo), from the third-party copy
# the collector cites.
VAST_READ = (
    "fio --numjobs=16 --ioengine=libaio --direct=1 --verify=0 --name=read_test  --directory=/var/lib/docker "
    "--bs=32k --iodepth=64 --size=128MB --readwrite=randread  --time_based --runtime=1.0s --group_reporting=1 "
    "--iodepth_batch_submit=64 --iodepth_batch_complete_max=64"
)


def vast_parse(output: str) -> float | None:
    """send_mach_info.py's parse: MiB/s after the first 'bw=', or GiB/s x 1024."""
    value = None
    try:
        value = float(output.split("bw=")[1].split("MiB/s")[0].strip())
    except (IndexError, ValueError):
        pass
    try:
        value = float(output.split("bw=")[1].split("GiB/s")[0].strip()) * 1024.0
    except (IndexError, ValueError):
        pass
    return value


def by_hand(path: str, size: int) -> float | None:
    line = VAST_READ.replace("--directory=/var/lib/docker", f"--filename={shlex.quote(path)}")
    line = line.replace("--size=128MB", f"--size={size} --readonly")
    out = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=60, check=False)
    return vast_parse(out.stdout)


def verbatim(scratch: str) -> float | None:
    line = VAST_READ.replace("--directory=/var/lib/docker", f"--directory={shlex.quote(scratch)}")
    out = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=300, check=False)
    return vast_parse(out.stdout)


def write_file(directory: str, size: int) -> str:
    fd, path = tempfile.mkstemp(prefix=".hostcheck-bench-disk_bw-", dir=directory)
    with os.fdopen(fd, "wb") as fh:
        for _ in range(size // MIB):
            fh.write(os.urandom(MIB))
        fh.flush()
        os.fsync(fh.fileno())
    return path


def offer_time(runs: int, directory: str) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "hostcheck.cli", "offer", "--offline", "--format", "json", "--disk-dir", directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=REPO,
        )  # fmt: skip
        samples.append(time.perf_counter() - started)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="directory to measure (default: Docker's data root, or its nearest existing parent)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--offer-runs", type=int, default=3)
    parser.add_argument("--verbatim", action="store_true", help="also run Vast's line unchanged (writes 2 GiB)")
    args = parser.parse_args()
    fio = shutil.which("fio")
    if fio is None:
        print("fio is not installed: sudo apt install fio", file=sys.stderr)
        return 2
    if args.dir:
        directory, note = args.dir, f"{args.dir} (--dir)"
    else:
        from hostcheck.collectors.docker_config import data_root, read_daemon_config

        where = target_directory(data_root(read_daemon_config()))
        if isinstance(where, Unknown):
            print(where.reason, file=sys.stderr)
            return 2
        directory, note = where
    size = args.size_mib * MIB
    print(f"{subprocess.run([fio, '--version'], capture_output=True, text=True).stdout.strip()}; {note}")
    print(f"test file: {args.size_mib} MiB of random data, shared by both, removed at the end\n")
    path = write_file(directory, size)
    rows = []
    try:
        for i in range(args.rounds):
            order = ("hostcheck", "hand") if i % 2 == 0 else ("hand", "hostcheck")
            got: dict[str, float | None] = {}
            for who in order:
                if who == "hostcheck":
                    value, _ = run_fio(path, size, fio=fio)
                    got[who] = None if isinstance(value, Unknown) else value
                else:
                    got[who] = by_hand(path, size)
            rows.append((i + 1, order[0], got["hostcheck"], got["hand"]))
    finally:
        os.unlink(path)
    print(f"{'round':>5}  {'first':9}  {'hostcheck MiB/s':>15}  {'by hand MiB/s':>13}  {'ratio':>6}")
    for n, first, ours, hand in rows:
        ratio = f"{ours / hand:.3f}" if ours and hand else "-"
        print(f"{n:>5}  {first:9}  {ours or float('nan'):>15.1f}  {hand or float('nan'):>13.1f}  {ratio:>6}")
    ours_all = [r[2] for r in rows if r[2]]
    hand_all = [r[3] for r in rows if r[3]]
    if ours_all and hand_all:
        mo, mh = statistics.median(ours_all), statistics.median(hand_all)
        print(f"{'median':>5}  {'':9}  {mo:>15.1f}  {mh:>13.1f}  {mo / mh:>6.3f}  (difference {abs(mo / mh - 1) * 100:.1f} %)")
    if args.verbatim:
        scratch = tempfile.mkdtemp(prefix=".hostcheck-bench-vast-", dir=directory)
        try:
            print(f"\nVast's line unchanged (16 x 128 MiB files laid out in {scratch}): {verbatim(scratch)} MiB/s")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    samples = offer_time(args.offer_runs, directory)
    print(f"\nhostcheck offer --offline (default 256 MiB disk_bw file and power window): median {statistics.median(samples):.2f} s "
          f"over {len(samples)} runs ({', '.join(f'{s:.2f}' for s in samples)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
