"""Host profile speed on a fresh nspawn lab host: check mode (dry run), converge, idempotent
rerun, check mode on the converged host, and rollback. Targets (issue 11): converge <= 60 s,
rerun (changed=0) <= 20 s, in the same run.

Run as root from the repository root:
    .venv/bin/python bench/profile.py                # one round
    .venv/bin/python bench/profile.py --rounds 3 --json out.json

The host is the same kind the tests use (Debian 12, Docker-capable nspawn); the apt mirror is
reached through slirp4netns, so the converge time includes downloading docker.io.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.lab.rootfs import ensure_rootfs
from tests.lab.session import Lab
from tests.lanes.profile import play

CONVERGE_TARGET_S = 60
RERUN_TARGET_S = 20
STAGES = (("check_fresh", "site.yml", True), ("converge", "site.yml", False), ("rerun", "site.yml", False),
          ("check_converged", "site.yml", True), ("rollback", "rollback.yml", False))


def one_round(lab: Lab) -> dict[str, Any]:
    with play.docker_capable_env():
        host = lab.start_hosts(1, nspawn_args=play.DOCKER_NSPAWN_ARGS)[0]
    figures: dict[str, Any] = {}
    try:
        for name, playbook, check in STAGES:
            result = play.run_playbook(host.inventory_path, playbook, check=check,
                                       extra_vars={"provider_vast_enabled": True})
            if result.rc != 0:
                raise SystemExit(f"{name} failed:\n{result.describe()}")
            figures[f"{name}_s"] = round(result.seconds, 1)
            figures[f"{name}_changed"] = result.stats(host.name)["changed"]
            figures[f"{name}_tasks"] = result.stats(host.name)["ok"] + result.stats(host.name)["changed"]
    finally:
        lab.stop_hosts([host])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    lab = Lab(ensure_rootfs())
    try:
        rounds = [one_round(lab) for _ in range(args.rounds)]
    finally:
        lab.close()
    figures: dict[str, Any] = {"rounds": args.rounds}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        figures[key] = values[0] if len(values) == 1 else {"median": statistics.median(values), "all": values}
    figures["converge_within_target"] = all(r["converge_s"] <= CONVERGE_TARGET_S for r in rounds)
    figures["rerun_within_target"] = all(r["rerun_s"] <= RERUN_TARGET_S and r["rerun_changed"] == 0 for r in rounds)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
