"""Host profile speed, side by side in one run, each column on its own identical fresh nspawn lab
host (Debian 12, Docker-capable), one host at a time so no column competes with another:

- ``--baseline REF``: the profile as it was at git ref REF (its playbooks, roles, plugins and
  ansible.cfg, exported with `git archive`), e.g. the previous release;
- this working tree's profile;
- dev-sec's os_hardening + ssh_hardening (``--devsec-collection DIR --ansible-collections DIR``,
  as bench/lynis.py takes them), run without its kernel-wide sysctls and auditd (refused in a
  container).

Each profile column: check mode on the fresh host, converge, idempotent rerun, check mode on the
converged host, rollback. dev-sec: check mode, converge, rerun (it has no rollback). With
``--lynis``, each column also gets the Lynis 3.0.8 `--quick` hardening index on the fresh host,
after the converge, and after rollback. Targets (issue 46): converge <= 40 s, rerun
(changed=0) <= 10 s.

Run as root from the repository root:
    .venv/bin/python bench/profile.py                          # this tree, one round
    .venv/bin/python bench/profile.py --baseline REF --devsec-collection DIR \\
        --ansible-collections DIR --lynis --rounds 2 --json out.json

The apt mirror is reached through slirp4netns, so a converge includes downloading docker.io.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lynis import devsec_playbook, install_lynis, lynis_index
from tests.lab.nspawn import LabHost
from tests.lab.rootfs import ensure_rootfs
from tests.lab.session import Lab
from tests.lanes.profile import play

CONVERGE_TARGET_S = 40
RERUN_TARGET_S = 10
EXTRA_VARS = {"provider_vast_enabled": True}
PROFILE_STAGES = (("check_fresh", "site.yml", True), ("converge", "site.yml", False), ("rerun", "site.yml", False),
                  ("check_converged", "site.yml", True), ("rollback", "rollback.yml", False))
DEVSEC_STAGES = (("check_fresh", True), ("converge", False), ("rerun", False))
EXPORTED = ("ansible.cfg", "playbooks", "roles", "plugins")


@dataclass
class Column:
    label: str
    run: Callable[[LabHost, str, bool], play.PlayResult]
    stages: tuple[tuple[str, str, bool], ...]


def this_tree() -> Column:
    def run(host: LabHost, playbook: str, check: bool) -> play.PlayResult:
        return play.run_playbook(host.inventory_path, playbook, check=check, extra_vars=EXTRA_VARS)
    return Column("this tree", run, PROFILE_STAGES)


def exported(ref: str, folder: Path) -> Column:
    """The profile at git ref ``ref``, run from its own folder with its own ansible.cfg."""
    listed = subprocess.run(["git", "-C", str(play.REPO), "ls-tree", "--name-only", ref], capture_output=True,
                            text=True, check=True).stdout.split()
    archive = subprocess.run(["git", "-C", str(play.REPO), "archive", "--format=tar", ref,
                              *[p for p in EXPORTED if p in listed]], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="tar")

    def run(host: LabHost, playbook: str, check: bool) -> play.PlayResult:
        return play.run_playbook(host.inventory_path, f"playbooks/{playbook}", check=check, extra_vars=EXTRA_VARS,
                                 project=folder)
    return Column(f"at {ref}", run, PROFILE_STAGES)


def devsec(collection: Path, ansible_collections: Path, folder: Path) -> Column:
    playbook, extra = devsec_playbook(collection, folder)

    def run(host: LabHost, _playbook: str, check: bool) -> play.PlayResult:
        previous = os.environ.get("ANSIBLE_COLLECTIONS_PATH")
        os.environ["ANSIBLE_COLLECTIONS_PATH"] = f"{folder}:{ansible_collections}"
        try:
            return play.run_playbook(host.inventory_path, playbook, check=check, extra_vars=extra)
        finally:
            if previous is None:
                os.environ.pop("ANSIBLE_COLLECTIONS_PATH", None)
            else:
                os.environ["ANSIBLE_COLLECTIONS_PATH"] = previous
    return Column("dev-sec", run, tuple((name, "", check) for name, check in DEVSEC_STAGES))


def one_round(lab: Lab, column: Column, lynis: bool) -> dict[str, Any]:
    with play.docker_capable_env():
        host = lab.start_hosts(1, nspawn_args=play.DOCKER_NSPAWN_ARGS)[0]
    figures: dict[str, Any] = {}
    try:
        if lynis:
            install_lynis(host)
            figures["lynis_fresh"] = lynis_index(host)["index"]
        for name, playbook, check in column.stages:
            if name == "rollback" and lynis:
                figures["lynis_converged"] = lynis_index(host)["index"]
            result = column.run(host, playbook, check)
            if result.rc != 0:
                raise SystemExit(f"{column.label}: {name} failed:\n{result.describe()}")
            stats = result.stats(host.name)
            figures[f"{name}_s"] = round(result.seconds, 1)
            figures[f"{name}_changed"] = stats["changed"]
            figures[f"{name}_tasks"] = stats["ok"] + stats["changed"]
        if lynis:
            key = "lynis_rolled_back" if "lynis_converged" in figures else "lynis_converged"
            figures[key] = lynis_index(host)["index"]
    finally:
        lab.stop_hosts([host])
    return figures


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        out[key] = values[0] if len(values) == 1 else {"median": statistics.median(values), "all": values}
    return out


def median(value: Any) -> Any:
    return value["median"] if isinstance(value, dict) else value


def table(figures: dict[str, dict[str, Any]]) -> str:
    rows = [("check mode, fresh host", "check_fresh"), ("converge", "converge"), ("rerun", "rerun"),
            ("check mode, converged host", "check_converged"), ("rollback", "rollback")]
    labels = list(figures)
    lines = [f"{'':<28}" + "".join(f"{label:>16}" for label in labels)]
    for title, key in rows:
        cells = []
        for label in labels:
            seconds = figures[label].get(f"{key}_s")
            changed = figures[label].get(f"{key}_changed")
            cells.append("-" if seconds is None else f"{median(seconds)} s ({median(changed)} ch)")
        lines.append(f"{title:<28}" + "".join(f"{c:>16}" for c in cells))
    for title, key in (("Lynis fresh", "lynis_fresh"), ("Lynis converged", "lynis_converged"),
                       ("Lynis after rollback", "lynis_rolled_back")):
        if any(key in f for f in figures.values()):
            lines.append(f"{title:<28}" + "".join(f"{median(f.get(key, '-'))!s:>16}" for f in figures.values()))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", metavar="REF", help="also run the profile as it was at this git ref")
    parser.add_argument("--devsec-collection", type=Path)
    parser.add_argument("--ansible-collections", type=Path)
    parser.add_argument("--lynis", action="store_true", help="Lynis index fresh, converged, after rollback")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostcheck-bench-profile-") as tmp:
        columns = []
        if args.baseline:
            columns.append(exported(args.baseline, Path(tmp) / "baseline"))
        columns.append(this_tree())
        if args.devsec_collection and args.ansible_collections:
            columns.append(devsec(args.devsec_collection, args.ansible_collections, Path(tmp) / "devsec"))
        lab = Lab(ensure_rootfs())
        rounds: dict[str, list[dict[str, Any]]] = {c.label: [] for c in columns}
        try:
            for _ in range(args.rounds):
                for column in columns:  # alternating, so a slow spell of the machine hits every column
                    rounds[column.label].append(one_round(lab, column, args.lynis))
        finally:
            lab.close()
    figures = {label: summarise(r) for label, r in rounds.items()}
    ours = figures["this tree"]
    figures["this tree"]["converge_within_target"] = all(
        r["converge_s"] <= CONVERGE_TARGET_S for r in rounds["this tree"])
    figures["this tree"]["rerun_within_target"] = all(
        r["rerun_s"] <= RERUN_TARGET_S and r["rerun_changed"] == 0 for r in rounds["this tree"])
    print(table(figures))
    print(f"this tree: converge within {CONVERGE_TARGET_S} s: {ours['converge_within_target']}; "
          f"rerun within {RERUN_TARGET_S} s with changed=0: {ours['rerun_within_target']}")
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, **figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
