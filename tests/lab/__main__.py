"""``python -m tests.lab build|reap|shell``: build the cache, clean stale sessions, or start
hosts and drop into a shell with their ssh_config (for poking at a lab host by hand)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from tests.lab.rootfs import ensure_rootfs
from tests.lab.session import Lab, reap_stale
from tests.lab.vm import ensure_vm_image


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab")
    sub = parser.add_subparsers(dest="cmd", required=True)
    build = sub.add_parser("build", help="build (or reuse) the rootfs and, with --vm, the VM image")
    build.add_argument("--vm", action="store_true")
    sub.add_parser("reap", help="clean up lab sessions whose owner process is gone")
    shell = sub.add_parser("shell", help="start hosts and open a shell that can ssh to them")
    shell.add_argument("-n", type=int, default=1)
    shell.add_argument("--vm", action="store_true")
    args = parser.parse_args()
    if args.cmd == "reap":
        print("reaped:", " ".join(reap_stale()) or "nothing")
        return 0
    rootfs = ensure_rootfs()
    print(f"rootfs {rootfs.key}: {rootfs.origin} in {rootfs.seconds:.1f}s ({rootfs.tarball})")
    if args.cmd == "build":
        if args.vm:
            image = ensure_vm_image(rootfs)
            print(f"vm image: {image.origin} in {image.seconds:.1f}s ({image.folder})")
        return 0
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


if __name__ == "__main__":
    sys.exit(main())
