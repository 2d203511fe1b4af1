"""Lynis hardening index of the host profile, side by side with dev-sec's hardening roles.

Two identical fresh nspawn lab hosts (Debian 12, Docker-capable) get Lynis from the Debian
mirror. Host A: Lynis before the profile, after converging site.yml, after an idempotent
rerun (changed=0, and /etc and /var/lib byte-identical to the converged state), after
rollback (and /etc and /var/lib back to the snapshot). Host B: Lynis before and after
dev-sec's os_hardening + ssh_hardening (collection devsec.hardening from its repository, its
dependencies from the `ansible` wheel), plus whether ip_forward survived and whether a rerun
changes anything. Every run: `lynis audit system --quick`, index read from its report.

Run as root from the repository root:
    .venv/bin/python bench/lynis.py --devsec-collection DIR --ansible-collections DIR [--json out.json]
    .venv/bin/python bench/lynis.py --vm [--json out.json]

--vm: the profile on the VM lane's qemu VM instead, where the kernel is the VM's own (in a
container the kernel-wide sysctls, the running kernel and AppArmor are the machine's): Lynis
before and after site.yml, with this machine's Lynis copied in.

DIR for --devsec-collection: a checkout of github.com/dev-sec/ansible-collection-hardening.
DIR for --ansible-collections: a folder holding ansible_collections/ (the `ansible` wheel
unpacked: `pip install --no-deps --target DIR ansible`). Without them the dev-sec column is
left out and says why.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.lab.rootfs import ensure_rootfs
from tests.lab.session import Lab
from tests.lanes.profile import play
from tests.lanes.profile.test_profile_lifecycle import IDLE_NOISE, PACKAGE_MANAGER_STATE

LYNIS = "lynis audit system --quick --no-colors --logfile /var/log/lynis-bench.log --report-file /var/log/lynis-bench.dat"
# Lynis's own log, report and its package are the bench's, not the profile's.
BENCH_STATE = ("/var/log", "/var/lib/lynis") + PACKAGE_MANAGER_STATE + IDLE_NOISE
DEVSEC_PLAY = [{"name": "dev-sec os and ssh hardening", "hosts": "all", "become": True,
                "collections": ["devsec.hardening"],
                "roles": ["devsec.hardening.os_hardening", "devsec.hardening.ssh_hardening"]}]


POINTS_RE = re.compile(r"Hardening: assigned (?:maximum number of hardening points for this item \((?P<full>\d+)\)"
                       r"|partial number of hardening points \((?P<got>\d+) of (?P<max>\d+)\))")


def test_points(log: str) -> dict[str, list[int]]:
    """Hardening points per Lynis test, [earned, possible], from its log: the index is their
    sum's ratio, so this says which tests make the difference between two hosts."""
    points: dict[str, list[int]] = {}
    test = "?"
    for line in log.splitlines():
        if "Performing test ID " in line:
            test = line.split("Performing test ID ", 1)[1].split(" ", 1)[0]
        elif m := POINTS_RE.search(line):
            got, most = (int(m["full"]),) * 2 if m["full"] else (int(m["got"]), int(m["max"]))
            earned = points.setdefault(test, [0, 0])
            earned[0] += got
            earned[1] += most
    return points


def lynis_index(host: Any, timeout: float = 900) -> dict[str, Any]:
    result = host.sudo(f"{LYNIS} >/dev/null 2>&1; cat /var/log/lynis-bench.dat", timeout=timeout)
    fields: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition("=")
        fields.setdefault(key, []).append(value)
    index = fields.get("hardening_index", ["?"])[0]
    # Each item is "ID|text|details|solution|"; ID and details name it (SSH-7408 is one ID for
    # every sshd setting).
    warnings = sorted({"|".join(w.split("|")[:3:2]) for w in fields.get("warning[]", [])})
    suggestions = sorted({"|".join(s.split("|")[:3:2]) for s in fields.get("suggestion[]", [])})
    log = host.sudo("cat /var/log/lynis-bench.log", timeout=60).stdout
    return {"index": int(index) if index.isdigit() else index,
            "warnings": len(fields.get("warning[]", [])), "suggestions": len(fields.get("suggestion[]", [])),
            "warning_ids": warnings, "suggestion_ids": suggestions, "points": test_points(log)}


def install_lynis(host: Any) -> None:
    host.sudo("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
              "lynis >/dev/null", check=True, timeout=900)


def copy_lynis(host: Any) -> None:
    """This machine's Lynis (scripts/test installs it) into ``host``: the VM installs nothing
    from a mirror for the bench."""
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz") as tar:
        for path in ("/usr/sbin/lynis", "/usr/share/lynis", "/etc/lynis"):
            tar.add(path, arcname=path.lstrip("/"))
    host.sudo("base64 -d | tar -xz -C /", input=base64.b64encode(payload.getvalue()).decode(), check=True,
              timeout=120)


def vm_column(lab: Any) -> dict[str, Any]:
    """The profile on the VM lane's qemu VM (its own kernel, so the kernel-wide sysctls apply):
    Lynis before and after site.yml. Under TCG each Lynis run takes about 15 minutes and the
    converge about 8, so there is no rerun or rollback column here (the nspawn host has them)."""
    vm = lab.start_vm()
    copy_lynis(vm)
    col: dict[str, Any] = {"before": lynis_index(vm, timeout=2700)}
    converge = play.run_playbook(vm.inventory_path, "site.yml")
    if converge.rc != 0:
        raise SystemExit(f"converge failed:\n{converge.describe()}")
    col["converge_s"] = round(converge.seconds, 1)
    col["after"] = lynis_index(vm, timeout=2700)
    return col


def profile_column(host: Any) -> dict[str, Any]:
    col: dict[str, Any] = {"before": lynis_index(host)}
    snap_before = play.snapshot(host)
    converge = play.run_playbook(host.inventory_path, "site.yml")
    if converge.rc != 0:
        raise SystemExit(f"converge failed:\n{converge.describe()}")
    col["converge_s"] = round(converge.seconds, 1)
    snap_converged = play.snapshot(host)
    rerun = play.run_playbook(host.inventory_path, "site.yml")
    col["rerun_s"] = round(rerun.seconds, 1)
    col["rerun_changed"] = rerun.stats(host.name)["changed"]
    col["rerun_byte_identical"] = play.file_diff(snap_converged, play.snapshot(host), ignore=BENCH_STATE) == {}
    col["ip_forward"] = host.sudo("sysctl -n net.ipv4.ip_forward").stdout.strip()
    col["after"] = lynis_index(host)
    rollback = play.run_playbook(host.inventory_path, "rollback.yml")
    if rollback.rc != 0:
        raise SystemExit(f"rollback failed:\n{rollback.describe()}")
    col["rolled_back"] = lynis_index(host)
    col["rollback_snapshot_equal"] = play.file_diff(snap_before, play.snapshot(host), ignore=BENCH_STATE) == {}
    return col


def devsec_kernel_keys(collection: Path) -> list[str]:
    """dev-sec's kernel-wide sysctls: refused inside a container (shared kernel), so on this
    lane they are passed as its own sysctl_unsupported_entries, as the profile skips its own."""
    import yaml

    role = collection / "roles/os_hardening"
    keys: set[str] = set()
    for path in (role / "defaults/main.yml", role / "vars/Debian.yml"):
        data = yaml.safe_load(path.read_text()) or {}
        for name, value in data.items():
            if name.startswith("sysctl") and isinstance(value, dict):
                keys |= {k for k in value if not k.startswith("net.")}
    return sorted(keys)


def devsec_playbook(collection: Path, folder: Path) -> tuple[Path, dict[str, Any]]:
    """dev-sec's collection laid out under ``folder`` (put ``folder`` on ANSIBLE_COLLECTIONS_PATH)
    and a playbook calling its two roles; the playbook and the variables it runs with here."""
    tree = folder / "ansible_collections" / "devsec" / "hardening"
    shutil.copytree(collection, tree, ignore=shutil.ignore_patterns(".git"))
    playbook = folder / "devsec.yml"
    playbook.write_text(json.dumps(DEVSEC_PLAY))
    # auditd cannot run in a container either (no kernel audit of its own).
    return playbook, {"sysctl_unsupported_entries": devsec_kernel_keys(collection), "os_auditd_enabled": False}


def devsec_column(host: Any, collection: Path, ansible_collections: Path) -> dict[str, Any]:
    col: dict[str, Any] = {"before": lynis_index(host)}
    with tempfile.TemporaryDirectory(prefix="hostcheck-devsec-") as folder:
        playbook, extra = devsec_playbook(collection, Path(folder))
        os.environ["ANSIBLE_COLLECTIONS_PATH"] = f"{folder}:{ansible_collections}"
        try:
            first = play.run_playbook(host.inventory_path, playbook, extra_vars=extra)
            if first.rc != 0:
                return {**col, "failed": first.tail(40)}
            col["converge_s"] = round(first.seconds, 1)
            snap = play.snapshot(host)
            again = play.run_playbook(host.inventory_path, playbook, extra_vars=extra)
            col["rerun_s"] = round(again.seconds, 1)
            col["rerun_changed"] = again.stats(host.name)["changed"]
            col["rerun_changed_tasks"] = again.changed_tasks
            col["rerun_byte_identical"] = play.file_diff(snap, play.snapshot(host), ignore=BENCH_STATE) == {}
        finally:
            os.environ.pop("ANSIBLE_COLLECTIONS_PATH", None)
    col["ip_forward"] = host.sudo("sysctl -n net.ipv4.ip_forward").stdout.strip()
    col["after"] = lynis_index(host)
    return col


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--devsec-collection", type=Path)
    parser.add_argument("--ansible-collections", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--vm", action="store_true",
                        help="the profile on a qemu VM instead (a kernel of its own; about 40 minutes under TCG)")
    args = parser.parse_args()
    with_devsec = bool(args.devsec_collection and args.ansible_collections)
    lab = Lab(ensure_rootfs())
    figures: dict[str, Any] = {}
    if args.vm:
        try:
            figures["vm"] = vm_column(lab)
        finally:
            lab.close()
        col = figures["vm"]
        print(f"lynis --quick on the VM: fresh {col['before']['index']}, after site.yml {col['after']['index']} "
              f"(converge {col['converge_s']} s under TCG)")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    try:
        with play.docker_capable_env():
            hosts = lab.start_hosts(2 if with_devsec else 1, nspawn_args=play.DOCKER_NSPAWN_ARGS)
        for host in hosts:
            install_lynis(host)
        figures["hostcheck"] = profile_column(hosts[0])
        if with_devsec:
            figures["devsec"] = devsec_column(hosts[1], args.devsec_collection, args.ansible_collections)
        else:
            figures["devsec"] = {"skipped": "no --devsec-collection/--ansible-collections given"}
    finally:
        lab.close()
    rows = [("fresh host", "before"), ("after the profile / dev-sec", "after"), ("after rollback", "rolled_back")]
    print(f"{'lynis --quick hardening index':<32}{'hostcheck':>12}{'dev-sec':>12}")
    for label, key in rows:
        ours = figures["hostcheck"].get(key, {}).get("index", "-")
        theirs = figures["devsec"].get(key, {}).get("index", "-") if isinstance(figures["devsec"], dict) else "-"
        print(f"{label:<32}{ours!s:>12}{theirs!s:>12}")
    for key in ("ip_forward", "converge_s", "rerun_s", "rerun_changed", "rerun_byte_identical",
                "rollback_snapshot_equal"):
        ours = figures["hostcheck"].get(key, "-")
        theirs = figures["devsec"].get(key, "-")
        print(f"{key:<32}{ours!s:>12}{theirs!s:>12}")
    theirs_after = figures["devsec"].get("after", {})
    if "suggestion_ids" in theirs_after:
        ours_after = figures["hostcheck"]["after"]
        for kind in ("warning_ids", "suggestion_ids"):
            left = sorted(set(ours_after[kind]) - set(theirs_after[kind]))
            print(f"{kind} dev-sec clears and the profile leaves: {' '.join(left) or '-'}")
            extra = sorted(set(theirs_after[kind]) - set(ours_after[kind]))
            print(f"{kind} the profile clears and dev-sec leaves: {' '.join(extra) or '-'}")
        ours_points, theirs_points = ours_after["points"], theirs_after["points"]
        for test in sorted(set(ours_points) | set(theirs_points)):
            a, b = ours_points.get(test, [0, 0]), theirs_points.get(test, [0, 0])
            if a != b:
                print(f"points {test:<12} hostcheck {a[0]}/{a[1]:<6} dev-sec {b[0]}/{b[1]}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
