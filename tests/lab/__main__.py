"""``python -m tests.lab build|reap|shell``: build the cache, clean stale sessions, or start
hosts and drop into a shell with their ssh_config (for poking at a lab host by hand)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tests.lab.hostcheck_install import dependency_wheels
from tests.lab.rootfs import PYTHON, SUITE, SUITES, ensure_rootfs
from tests.lab.session import Lab, reap_stale
from tests.lab.vm import ensure_vm_image


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab")
    sub = parser.add_subparsers(dest="cmd", required=True)
    build = sub.add_parser("build", help="build (or reuse) the rootfs and, with --vm, the VM image")
    build.add_argument("--vm", action="store_true")
    build.add_argument("--suites", default=SUITE,
                       help=f"comma-separated Debian suites ({', '.join(SUITES)}) or 'all'; built in parallel")
    build.add_argument("--wheels", action="store_true", help="also the dependency wheels for each suite's Python")
    sub.add_parser("reap", help="clean up lab sessions whose owner process is gone")
    shell = sub.add_parser("shell", help="start hosts and open a shell that can ssh to them")
    shell.add_argument("-n", type=int, default=1)
    shell.add_argument("--vm", action="store_true")
    args = parser.parse_args()
    if args.cmd == "reap":
        print("reaped:", " ".join(reap_stale()) or "nothing")
        return 0
    if args.cmd == "build":
        return build_cache(list(SUITES) if args.suites == "all" else args.suites.split(","), args.vm, args.wheels)
    rootfs = ensure_rootfs()
    print(f"rootfs {rootfs.key}: {rootfs.origin} in {rootfs.seconds:.1f}s ({rootfs.tarball})")
    lab = Lab(rootfs)
    try:
        hosts = lab.start_hosts(args.n) if args.n else []
        if args.vm:
            hosts.append(lab.start_vm())
        for host in hosts:
            print(f"{host.name}: ssh -F {lab.ssh_config} admin@{host.name}")
        print(f"inventory: {lab.inventory_path}; exit the shell to tear down")
        subprocess.run([os.environ.get("SHELL", "/bin/bash")], env=dict(os.environ, LAB_SSH_CONFIG=str(lab.ssh_config)))
    finally:
        lab.close()
    return 0


def build_cache(suites: list[str], vm: bool, wheels: bool) -> int:
    """Fill the lab cache: each suite's rootfs (in parallel: mostly downloads and dpkg, the VM
    image from the default suite's tree), and the wheels; one line per artifact, cold or warm."""
    started = time.monotonic()

    def one_suite(suite: str) -> list[str]:
        rootfs = ensure_rootfs(suite=suite)
        state = {"built": "cold", "extracted": "extracted from tarball", "cached": "warm"}[rootfs.origin]
        lines = [f"rootfs {suite} ({rootfs.key}): {state} in {rootfs.seconds:.1f}s"]
        if vm and suite == SUITE:
            image = ensure_vm_image(rootfs)
            lines.append(f"vm image {suite}: {'cold' if image.origin == 'built' else 'warm'} in {image.seconds:.1f}s")
        if wheels:
            t0 = time.monotonic()
            dependency_wheels(PYTHON[suite])
            lines.append(f"wheels py{PYTHON[suite]}: {time.monotonic() - t0:.1f}s")
        return lines

    with ThreadPoolExecutor(max_workers=len(suites)) as pool:
        results = list(pool.map(one_suite, suites))
    for lines in results:
        for line in lines:
            print(f"lab cache: {line}", flush=True)
    print(f"lab cache: ready in {time.monotonic() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
